# flashsim: `make lab` opens the course, `make test` runs every test (notebooks included).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
# pytest workers: 2 by default (CI has 2 cores); `make test JOBS=1` for a serial run
JOBS   ?= 2
# notebooks run at small sizes in tests unless told otherwise (`make test FLASHSIM_SIZE=full`)
export FLASHSIM_SIZE ?= small

.PHONY: lab test figures venv clean strip

venv: $(STAMP)

# torch first, pinned, so that no other requirement pulls a different (CUDA, multi-GB) torch build.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet "torch==2.13.0"
	$(PY) -m pip install --quiet -e ".[test]"
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

# full sizes in the lab unless FLASHSIM_LAB_SIZE=small; --allow-root only where we run as root (containers)
lab: $(STAMP)
	FLASHSIM_SIZE=$${FLASHSIM_LAB_SIZE:-full} $(VENV)/bin/jupyter lab notebooks/ \
		$$([ "$$(id -u)" = 0 ] && echo --allow-root)

test: $(STAMP)
	$(PY) -m pytest -n $(JOBS) --nbmake --nbmake-timeout=900 tests notebooks

figures: $(STAMP)
	$(PY) -m flashsim.figures

strip:
	$(VENV)/bin/nbstripout notebooks/*.ipynb

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
