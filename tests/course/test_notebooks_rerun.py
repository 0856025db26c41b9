"""Re-running any cell leaves a notebook consistent: every code cell runs twice in a row without error.

(nbmake runs each notebook once from a fresh kernel; this runs each cell twice, in plain Python, at small size.)
"""
from pathlib import Path

import pytest

from flashsim.course.kit.notebook_exec import run_plain

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_cell_can_run_twice(path, monkeypatch):
    monkeypatch.setenv("FLASHSIM_SIZE", "small")
    run_plain(path, repeat=2, quiet=True)
