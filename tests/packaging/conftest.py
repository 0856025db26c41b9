"""Fixtures of the packaging tests: flashsim's wheel, built once per test session (per xdist worker)."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from packaging_helpers import ROOT, WHEEL_SOURCES, run


def pytest_collection_modifyitems(config, items):
    """Tests marked ``packaging`` build wheels in isolated environments and install into fresh venvs, which pip
    fills from the package index: where the caller says there is none (``FLASHSIM_NO_INDEX=1``, as
    benchmarks/gpu_suite.sh does on a GPU machine without network) they skip, saying why, instead of failing in pip."""
    if os.environ.get("FLASHSIM_NO_INDEX", "") not in ("", "0"):
        skip = pytest.mark.skip(reason="builds wheels or venvs from the package index, which this machine cannot "
                                       "reach (FLASHSIM_NO_INDEX=1)")
        for item in items:
            if item.get_closest_marker("packaging"):
                item.add_marker(skip)


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
