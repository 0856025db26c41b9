"""Which commands `make` would run (`make -n`): the torch index, the lock, lint-imports before pytest, the site,
and CI's use of them. Nothing is installed: `make -n -B` prints the recipe for a venv that is not there."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed")


def _make_n(tmp_path, *args, nvidia_smi_exit=None, torch_index=None):
    """`make -n -B ARGS` with a fake nvidia-smi first on PATH (exit code ``nvidia_smi_exit``; 127: none there)
    and TORCH_INDEX unset (None) or set in the environment."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "nvidia-smi"
    if nvidia_smi_exit is not None:
        fake.write_text(f"#!/bin/sh\nexit {nvidia_smi_exit}\n")
        fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("TORCH_INDEX", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    if torch_index is not None:
        env["TORCH_INDEX"] = torch_index
    venv = tmp_path / "venv"
    out = subprocess.run(["make", "-n", "-B", f"VENV={venv}", *args], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True).stdout
    return out.replace(str(venv), "VENV")


def _torch_line(out):
    (line,) = [ln for ln in out.splitlines() if '"torch==' in ln]
    return line


def test_no_gpu_takes_torch_from_pytorchs_cpu_index(tmp_path):
    line = _torch_line(_make_n(tmp_path, "venv", nvidia_smi_exit=9))
    assert f"--index-url {CPU_INDEX}" in line and "--no-deps" in line
    assert line.endswith('"torch==2.13.0"')


def test_no_nvidia_smi_at_all_is_no_gpu(tmp_path):
    line = _torch_line(_make_n(tmp_path, "venv", nvidia_smi_exit=None, torch_index=None))
    if shutil.which("nvidia-smi") is None:
        assert f"--index-url {CPU_INDEX}" in line


def test_a_working_nvidia_smi_takes_the_cuda_build_from_pips_index(tmp_path):
    line = _torch_line(_make_n(tmp_path, "venv", nvidia_smi_exit=0))
    assert "--index-url" not in line and "--no-deps" not in line
    assert line.endswith('pip install --quiet  "torch==2.13.0"')


def test_empty_torch_index_uses_pips_own_configuration(tmp_path):
    for smi in (0, 9):
        line = _torch_line(_make_n(tmp_path, "venv", nvidia_smi_exit=smi, torch_index=""))
        assert "--index-url" not in line
    line = _torch_line(_make_n(tmp_path, "venv", "TORCH_INDEX=", nvidia_smi_exit=9))
    assert "--index-url" not in line


def test_torch_index_can_be_any_url(tmp_path):
    line = _torch_line(_make_n(tmp_path, "venv", nvidia_smi_exit=9, torch_index="https://example.invalid/whl"))
    assert "--no-deps --index-url https://example.invalid/whl" in line


def test_install_order_torch_then_lock_then_flashsim(tmp_path):
    out = _make_n(tmp_path, "venv", nvidia_smi_exit=9).splitlines()
    steps = [i for i, ln in enumerate(out) for key in ('"torch==', "-r requirements/lock.txt", "--no-deps -e .",
                                                         "ipykernel install") if key in ln]
    assert steps == sorted(steps) and len(steps) == 4


def test_make_test_runs_lint_imports_then_pytest_on_everything(tmp_path):
    out = _make_n(tmp_path, "test", nvidia_smi_exit=9)
    lint = out.index("if [ -f .importlinter ]; then VENV/bin/lint-imports; fi")
    pytest_at = out.index("-m pytest -n 2 --dist loadgroup --nbmake --nbmake-timeout=900 tests notebooks")
    assert lint < pytest_at


def test_make_lab_opens_jupyterlab_on_the_notebooks(tmp_path):
    out = _make_n(tmp_path, "lab", nvidia_smi_exit=9)
    assert "VENV/bin/jupyter lab notebooks/" in out


def test_make_site_builds_with_tools_build_site(tmp_path):
    out = _make_n(tmp_path, "site", nvidia_smi_exit=9)
    assert "FLASHSIM_SIZE=small VENV/bin/python tools/build_site.py _build/site" in out


def test_ci_sets_an_empty_torch_index_and_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "export TORCH_INDEX=" in ci.splitlines()
    assert "\nmake test\n" in ci
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme.split("```bash", 1)[1].split("```", 1)[0]
