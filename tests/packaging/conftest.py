"""Fixtures of the packaging tests: flashsim's wheel, built once per test session (per xdist worker)."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from packaging_helpers import ROOT, WHEEL_SOURCES, run


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """flashsim's wheel, built from a copy of the checkout (``pip wheel --no-deps``)."""
    src = tmp_path_factory.mktemp("wheel-src")
    for name in WHEEL_SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info"))
        else:
            shutil.copy2(path, src / name)
    out = tmp_path_factory.mktemp("wheel")
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", out, src], timeout=600)
    (whl,) = out.glob("flashsim-*.whl")
    return whl
