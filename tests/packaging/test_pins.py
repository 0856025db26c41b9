"""The pins hold: pyproject.toml's ranges, the exact lock (requirements/lock.txt) and Binder's environment.yml
agree, and the lock keeps the versions the course was developed with (requirements/pins.txt)."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
LOCK_TEXT = (ROOT / "requirements" / "lock.txt").read_text()
# the lock is written on Linux with Python 3.11: the environment its markers are read in
LINUX_311 = dict(default_environment(), sys_platform="linux", platform_system="Linux", python_version="3.11")


def _exact(lines) -> dict[str, str]:
    """{canonical name: version} of ``name==version[; marker]`` lines; comments and options skipped."""
    out = {}
    for line in lines:
        line = line.split("#")[0].strip()
        if not line or line.startswith("-"):
            continue
        req = Requirement(line)
        (spec,) = req.specifier
        assert spec.operator == "==", f"{line!r} is not an exact pin"
        out[canonicalize_name(req.name)] = spec.version
    return out


LOCK = _exact(LOCK_TEXT.splitlines())


def _declared() -> list[Requirement]:
    reqs = [Requirement(r) for r in PROJECT["dependencies"]]
    for extra in PROJECT["optional-dependencies"].values():
        reqs += [Requirement(r) for r in extra if not r.startswith("flashsim")]
    return reqs


def test_version_is_single_sourced():
    assert "version" not in PROJECT and "version" in PROJECT["dynamic"]
    dynamic = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["dynamic"]
    assert dynamic["version"] == {"attr": "flashsim.__version__"}
    init = (ROOT / "flashsim" / "__init__.py").read_text()
    assert len(re.findall(r"^__version__ = \"[^\"]+\"", init, flags=re.MULTILINE)) == 1


def test_base_is_the_simulator_and_extras_are_as_the_issue_lists():
    base = {canonicalize_name(Requirement(r).name) for r in PROJECT["dependencies"]}
    assert base == {"numpy", "matplotlib", "tqdm", "platformdirs"}
    extras = PROJECT["optional-dependencies"]
    names = {k: {canonicalize_name(Requirement(r).name) for r in v} for k, v in extras.items()}
    assert {"jupyterlab", "ipywidgets", "ipykernel", "ipympl"} <= names["lab"]
    assert names["kernels"] == {"torch", "triton"}
    assert Requirement(next(r for r in extras["kernels"] if r.startswith("triton"))).marker.evaluate(
        dict(LINUX_311, sys_platform="darwin")) is False, "triton is for Linux only"
    assert names["cpu"] == {"numba"}
    assert {"pytest", "pytest-xdist", "hypothesis", "nbmake", "nbstripout", "playwright", "pyyaml",
            "import-linter"} <= names["test"]
    assert Requirement(extras["all"][0]).extras == {"lab", "kernels", "cpu"}
    assert "torch" not in names["colab"] and "numpy" not in names["colab"], "Colab keeps its own torch and numpy"


def test_declared_requirements_are_ranges_not_pins():
    for req in _declared():
        assert not any(s.operator in ("==", "===") for s in req.specifier), f"{req} pins; pins go in the lock"


@pytest.mark.parametrize("req", _declared(), ids=str)
def test_lock_satisfies_every_declared_range(req):
    if req.marker and not req.marker.evaluate(LINUX_311):
        return
    name = canonicalize_name(req.name)
    assert name in LOCK, f"{req} is declared but not in requirements/lock.txt (run `make lock`)"
    assert req.specifier.contains(LOCK[name], prereleases=True), f"lock has {name}=={LOCK[name]}, outside {req}"


def test_lock_keeps_the_held_versions():
    held = _exact((ROOT / "requirements" / "pins.txt").read_text().splitlines())
    assert {k: LOCK.get(k) for k in held} == held
    # the versions the running code was written against (the issue's list)
    for name, version in {"numpy": "2.4.6", "numba": "0.68.1", "matplotlib": "3.11.2", "ipywidgets": "8.1.9",
                          "jupyterlab": "4.6.6", "torch": "2.13.0", "triton": "3.9.0", "tqdm": "4.70.1",
                          "pytest": "9.2.0"}.items():
        assert LOCK[name] == version


def test_lock_has_no_cuda_libraries_and_no_local_labels():
    assert not [n for n in LOCK if n.startswith("nvidia-")], "the lock must hold the CPU torch's dependencies only"
    assert not [v for v in LOCK.values() if "+" in v], "torch==2.13.0 must hold for the CPU and the CUDA build"
    assert not re.search(r"^flashsim\b", LOCK_TEXT, flags=re.MULTILINE), "make installs flashsim itself, editable"
    triton = next(line for line in LOCK_TEXT.splitlines() if line.startswith("triton=="))
    assert "sys_platform == 'linux'" in triton


def test_environment_yml_installs_the_lock_with_a_cpu_torch():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "python=3.11" in env["dependencies"]
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert pip[0] == "--extra-index-url https://download.pytorch.org/whl/cpu", "Binder has no GPU: CPU torch"
    assert pip[-1] == "-e ."
    pins = pip[1:-1]
    assert "torch==2.13.0+cpu" in pins, "the CPU build, which only PyTorch's CPU index serves"
    got = _exact(p.replace("+cpu", "") for p in pins)
    assert got == LOCK


def test_makefile_installs_the_lock():
    makefile = (ROOT / "Makefile").read_text()
    assert "LOCK   := requirements/lock.txt" in makefile
    assert "pip install --quiet -r $(LOCK)" in makefile
    assert "pip install --quiet --no-deps -e ." in makefile
