"""Every checker takes quiet=True: the same verdict, nothing printed; printed, its first line is the headline."""
import importlib.util
from pathlib import Path

import pytest

from flashsim import exercises
from flashsim.course.kit import checker
from flashsim.course.kit.reveal import solution

HERE = Path(__file__).parent / "wrong_answers"


def _first_wrong_answers() -> dict:
    out = {}
    for path in sorted(HERE.glob("ch*.py")):
        spec = importlib.util.spec_from_file_location(f"wrong_answers_quiet_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for ex_id, fn, _ in module.CATALOGUE:
            out.setdefault(ex_id, fn)
    return out


WRONG = _first_wrong_answers()


@pytest.fixture(autouse=True)
def _progress_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("FLASHSIM_DATA_DIR", str(tmp_path))


@pytest.mark.parametrize("ex", checker.exercises(), ids=lambda e: e.id)
def test_quiet_checkers_print_nothing_and_still_judge(ex, capsys):
    check = getattr(exercises, ex.checker)
    (right,) = solution(ex.id)
    assert check(right, quiet=True) and not check(WRONG[ex.id], quiet=True)
    assert capsys.readouterr().out == ""
    loud = check(right)
    assert loud and capsys.readouterr().out.startswith(loud.headline())
