"""Helpers of the packaging tests (tests/packaging/): clean environments for child processes, fresh venvs."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements" / "lock.txt"
# what a wheel is built from (a copy, so that nothing is written into the checkout and two builds never race)
WHEEL_SOURCES = ("flashsim", "pyproject.toml", "README.md", "LICENSE", "LICENSE-CONTENT")


def clean_env(**extra) -> dict:
    """This process's environment without what would leak the checkout or its venv into a child venv."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "PYTHONSTARTUP", "JUPYTER_PATH")}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONDONTWRITEBYTECODE="1", **extra)
    return env


def run(cmd, *, timeout=900, **kw) -> subprocess.CompletedProcess:
    """Run ``cmd``; on failure, fail the test with the end of its output."""
    kw.setdefault("env", clean_env())
    proc = subprocess.run([str(c) for c in cmd], check=False, capture_output=True, text=True, timeout=timeout, **kw)
    if proc.returncode != 0:
        pytest.fail(f"{' '.join(map(str, cmd))} exited {proc.returncode}:\n{(proc.stdout + proc.stderr)[-4000:]}")
    return proc


def make_venv(path: Path) -> Path:
    """A fresh virtual environment at ``path`` with pip; returns its python."""
    run([sys.executable, "-m", "venv", path])
    return path / "bin" / "python"
