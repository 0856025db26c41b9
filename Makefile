# flashsim: `make lab` opens the course, `make test` runs every test (notebooks included), `make site` builds the
# course as a static website.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
# the exact versions everything installs (`make lock` rewrites it from pyproject.toml's ranges)
LOCK   := requirements/lock.txt
TORCH_VERSION := $(shell sed -n 's/^torch==\([^ ;#]*\).*/\1/p' $(LOCK))
# Where torch comes from. Unset: PyTorch's CPU wheel index on a machine without an NVIDIA GPU (the public index's
# Linux torch is the multi-GB CUDA build), and pip's own index, whose Linux torch is the CUDA build, where
# `nvidia-smi` works. Set it empty (`make lab TORCH_INDEX=`, as .ci/run does) to use pip's own configuration,
# or to another index URL.
ifeq ($(origin TORCH_INDEX),undefined)
TORCH_INDEX := $(shell nvidia-smi >/dev/null 2>&1 || echo https://download.pytorch.org/whl/cpu)
endif
# torch alone from TORCH_INDEX (its dependencies come pinned from the lock); with no index, as pip is configured
TORCH_INSTALL := $(if $(strip $(TORCH_INDEX)),--no-deps --index-url $(strip $(TORCH_INDEX)))
# pytest workers: 2 by default (CI has 2 cores); `make test JOBS=1` for a serial run
JOBS   ?= 2
# notebooks run at small sizes in tests unless told otherwise (`make test FLASHSIM_SIZE=full`)
export FLASHSIM_SIZE ?= small
SITE   ?= _build/site

.PHONY: lab test site figures venv lock clean strip

venv: $(STAMP)

# torch first, at the locked version from TORCH_INDEX, so that no other requirement pulls another build; then the
# lock, exactly; then flashsim itself, editable, with nothing more.
$(STAMP): pyproject.toml $(LOCK)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(TORCH_INSTALL) "torch==$(TORCH_VERSION)"
	$(PY) -m pip install --quiet -r $(LOCK)
	$(PY) -m pip install --quiet --no-deps -e .
	$(PY) -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

# full sizes in the lab unless FLASHSIM_LAB_SIZE=small; --allow-root only where we run as root (containers)
lab: $(STAMP)
	JUPYTER_CONFIG_PATH=$(CURDIR)/notebooks/.jupyter$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH} \
	FLASHSIM_SIZE=$${FLASHSIM_LAB_SIZE:-full} $(VENV)/bin/jupyter lab notebooks/ \
		$$([ "$$(id -u)" = 0 ] && echo --allow-root)

# the layer contracts (.importlinter) first, then every test and every notebook (--dist loadgroup: the tests
# marked xdist_group, tests/packaging's venvs and website, each stay on one worker and build once)
test: $(STAMP)
	if [ -f .importlinter ]; then $(VENV)/bin/lint-imports; fi
	$(PY) -m pytest -n $(JOBS) --dist loadgroup --nbmake --nbmake-timeout=900 tests notebooks

# the course as a static website in $(SITE)/ (open $(SITE)/index.html): every notebook executed at small size
site: $(STAMP)
	FLASHSIM_SIZE=small $(PY) tools/build_site.py $(SITE)

figures: $(STAMP)
	$(PY) -m flashsim.course.figures

# rewrite requirements/lock.txt and environment.yml from pyproject.toml (needs PyPI)
lock: $(STAMP)
	$(PY) -m pip install --quiet pip-tools
	$(PY) tools/lock.py

strip:
	$(VENV)/bin/nbstripout notebooks/*.ipynb

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis _build
