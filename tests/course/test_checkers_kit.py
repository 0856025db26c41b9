"""The checker kit (flashsim.course.kit.checker): the verdict line, no ok about a NaN, the learner's own line,
out-of-bounds bytes named as such, graded hints, and the one door to solutions (reveal)."""
import math
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from flashsim import exercises
from flashsim.course.kit import checker
from flashsim.course.kit.reveal import reveal, solution
from flashsim.errors import FlashsimError

EX = checker.get_exercise("00.1")


@pytest.fixture(autouse=True)
def _progress_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("FLASHSIM_DATA_DIR", str(tmp_path))


def test_verdict_first_line_is_a_mark_and_the_exercise(capsys):
    v = checker.verdict(EX, True, "fine")
    assert capsys.readouterr().out.startswith("✔ 00.1 tensor bytes: PASSED — fine")
    v = checker.verdict(EX, False, "not fine", diagnosis="x", quiet=True)
    assert not v and v.headline().startswith("✘ 00.1") and capsys.readouterr().out == ""
    assert repr(v) == "Verdict('00.1', passed=False, diagnosis='x')"


def test_no_ok_about_a_nan():
    v = checker.verdict(EX, True, "looks fine", max_error=math.nan, quiet=True)
    assert not v and v.diagnosis == "non_finite"
    v = checker.check_cases(EX, lambda x: math.nan, [(1.0,)], lambda x: 1.0, rel=1.0, quiet=True)
    assert not v and v.diagnosis == "non_finite"
    q, k, vv = checker.random_qkv(8, 4, 0)
    out = checker.reference_attention(q, k, vv)
    out[3, 1] = np.inf
    key, _, _ = checker.diagnose_attention(out, q, k, vv, causal=False, tol=1e3)
    assert key != "passed"


def test_stub_and_learner_error_are_reported_not_raised():
    def stub(*a):
        raise NotImplementedError
    v = checker.check_cases(EX, stub, [(1,)], lambda x: x, quiet=True)
    assert v.diagnosis == "not_implemented" and v.message.startswith("not attempted yet")

    def buggy(x):
        return x / undefined_name  # noqa: F821
    v = checker.check_cases(EX, buggy, [(1,)], lambda x: x, quiet=True)
    assert v.diagnosis == "learner_error"
    assert "NameError: name 'undefined_name' is not defined" in v.message
    assert "test_checkers_kit.py:" in v.message and "x / undefined_name" in v.message


def test_a_learner_error_is_reported_without_a_working_folder(tmp_path, monkeypatch):
    """A notebook whose folder was removed (os.getcwd() raises) still gets a verdict, not a crash in the checker."""
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()

    def buggy(x):
        return x / 0
    v = checker.check_cases(EX, buggy, [(1,)], lambda x: x, quiet=True)
    assert v.diagnosis == "learner_error" and "ZeroDivisionError" in v.message and "x / 0" in v.message


def test_libraries_are_told_from_the_learners_files_by_folder(tmp_path, monkeypatch):
    """An imported package outside the working folder is a library wherever it sits (not only under
    site-packages); the working folder's files stay the learner's, also under a namespace folder that holds it."""
    work = tmp_path / "proj" / "notebooks"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    monkeypatch.setitem(sys.modules, "proj", SimpleNamespace(__path__=[str(tmp_path / "proj")]))
    monkeypatch.setitem(sys.modules, "faketriton", SimpleNamespace(__path__=[str(tmp_path / "src" / "faketriton")]))
    dirs = checker._library_dirs()
    assert checker._is_learner_file(str(work / "helpers.py"), dirs)
    assert not checker._is_learner_file(str(tmp_path / "src" / "faketriton" / "compiler.py"), dirs)


def test_out_of_bounds_bytes_are_named():
    rows = checker.io_rows({"loads": {"K": 64, "?": 32}, "stores": {"O": 16}},
                           {"loads": {"K": 64}, "stores": {"O": 16}})
    assert checker.io_differs(rows) == ["?"]
    text = str(checker.io_table(rows))
    assert "out of bounds (no tensor)" in text and " ? " not in text and "✘" in text


def test_hints_are_graded_and_opened_on_request(capsys):
    first = exercises.hint("05.2")
    assert first.startswith("hint 1/3") and "a question" in first and first.split(": ", 1)[1].split(" (")[0].endswith("?")
    second = exercises.hint("05.2")
    third = exercises.hint("05.2")
    assert "hint 2/3" in second and "a pointer" in second
    assert "hint 3/3" in third and "the step" in third and "reveal" in third
    assert exercises.hint("5.2", level=1) == first
    with pytest.raises(FlashsimError):
        exercises.hint("99.9")


def test_reveal_is_per_exercise_and_the_only_door(capsys):
    text = exercises.reveal("12.1")
    assert "def flash_inner" in text and "def kernel_kv_bytes" not in text
    assert "def kernel_kv_bytes" in reveal("12.2", quiet=True)
    whole = reveal("05", quiet=True)
    assert all(f"def {n}" in whole for n in ("online_block_update", "flash2_forward_loop", "fa1_hbm_bytes"))
    assert [f.__name__ for f in solution("04.3")] == ["safe_softmax"]
    for bad in ("99.1", "05.9", "x"):
        with pytest.raises(FlashsimError):
            reveal(bad, quiet=True)


def test_every_exercise_has_a_solution_and_a_checker():
    for ex in checker.exercises():
        assert callable(getattr(exercises, ex.checker))
        assert solution(ex.id)


def test_a_hint_is_shown_once_in_jupyter(capsys):
    """hint() prints its text; left as a cell's last value, Jupyter does not show it again as Out[]."""
    text = exercises.hint("05.1", level=1)
    printed = capsys.readouterr().out
    assert printed.strip() == str(text)
    text._ipython_display_()
    assert capsys.readouterr().out == ""
    quiet = exercises.hint("05.1", level=1, quiet=True)
    assert capsys.readouterr().out == ""
    quiet._ipython_display_()
    assert capsys.readouterr().out.strip() == str(quiet)


def test_constant_and_none_answers_are_named_not_a_factor():
    v = checker.check_cases(EX, lambda s, dt: 0, [((2, 3), "fp16"), ((4,), "fp32")], lambda s, dt: 1 + len(s),
                            quiet=True)
    assert v.diagnosis == "constant_answer" and "0× " not in v.message
    v = checker.check_cases(EX, lambda s, dt: None, [((2, 3), "fp16")], lambda s, dt: 1, quiet=True)
    assert v.diagnosis == "returned_none"


def _plain(text: str) -> str:
    import re
    return re.sub(r"\s+", " ", re.sub(r"[$\\{}*`_]", "", text.lower()))


def test_no_hint_repeats_a_sentence_of_its_chapter():
    """Hints add something: none of their sentences (25+ characters) is already in the chapter's prose."""
    import json
    import re
    from pathlib import Path
    root = Path(__file__).resolve().parents[2] / "notebooks"
    for ex in checker.exercises():
        nb = next(root.glob(f"{ex.chapter}_*.ipynb"), None)
        if nb is None:
            continue
        prose = _plain(" ".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"]
                                if c["cell_type"] == "markdown"))
        for h in ex.hints:
            for sentence in re.split(r"(?<=[.?!;:])\s+", h):
                s = _plain(sentence).strip(" .?;:")
                assert len(s) < 25 or s not in prose, f"{ex.id}: the hint repeats the chapter: {sentence!r}"
