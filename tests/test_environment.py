"""environment.yml (conda/Binder) pins the same packages at the same versions as pyproject.toml."""
import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _pins(requirements):
    pins = {}
    for req in requirements:
        req = req.split(";")[0].strip()
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s]+)", req)
        assert m, f"{req!r} is not pinned with =="
        pins[m.group(1).lower()] = m.group(2)
    return pins


def test_environment_yml_agrees_with_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = _pins(project["dependencies"] + project["optional-dependencies"]["test"])
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    got = _pins([r for r in pip_section if not r.startswith("-e")])
    assert got == wanted
    assert "-e ." in pip_section


def test_torch_is_the_pinned_cpu_build_version():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "torch==2.13.0" in project["dependencies"]
