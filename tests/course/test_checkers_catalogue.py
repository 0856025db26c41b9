"""The catalogue of wrong answers (tests/course/wrong_answers/chNN.py): every catalogued wrong answer gets its
diagnosis, every solution passes, every exercise of chapters 00–14 has at least five realistic wrong answers with
a specific diagnosis (issue 26: not "k of n cases differ", not a bare "constant factor"), and the final kernel's
catalogue has at least 8 distinct diagnoses (issue 12, "checkers that diagnose")."""
import importlib.util
from pathlib import Path

import pytest

from flashsim import exercises
from flashsim.course.kit import checker
from flashsim.course.kit.reveal import solution

HERE = Path(__file__).parent / "wrong_answers"


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"wrong_answers_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CATALOGUE = [entry for p in sorted(HERE.glob("ch*.py")) for entry in _load(p).CATALOGUE]
IDS = [f"{ex}-{getattr(fn, '__name__', 'lambda')}-{diag}" for ex, fn, diag in CATALOGUE]


@pytest.fixture(autouse=True)
def _progress_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("FLASHSIM_DATA_DIR", str(tmp_path))


def _check(exercise_id):
    return getattr(exercises, checker.get_exercise(exercise_id).checker)


@pytest.mark.parametrize("exercise_id,wrong,diagnosis", CATALOGUE, ids=IDS)
def test_wrong_answer_gets_its_diagnosis(exercise_id, wrong, diagnosis, capsys):
    v = _check(exercise_id)(wrong)
    out = capsys.readouterr().out
    assert not v, v.message
    assert out.startswith("✘"), out
    assert v.diagnosis == diagnosis, f"{v.diagnosis}: {v.message}"
    assert "InterpreterError(" not in v.message and "\\'" not in v.message


@pytest.mark.parametrize("ex", checker.exercises(), ids=lambda e: e.id)
def test_solution_passes(ex, capsys):
    (fn,) = solution(ex.id)
    v = getattr(exercises, ex.checker)(fn)
    assert v, v.message
    assert capsys.readouterr().out.startswith("✔")


#: diagnoses that name no mistake: a pattern ("k of n differ"), an exception, a stub, a type
GENERIC = {"mismatch", "wrong", "wrong_kinds", "wrong_output", "wrong_values", "wrong_gradients", "wrong_mask",
           "wrong_merge", "wrong_combine", "non_finite", "constant_factor", "wrong_bytes", "not_implemented",
           "learner_error", "wrong_type", "constant_answer", "returned_none"}
#: chapters whose exercises are held to five specific diagnoses: every chapter
FIVE_FROM = [f"{c:02d}" for c in range(15)]


def specific_counts() -> dict:
    """{exercise id: (wrong answers catalogued, of which with a specific diagnosis)}: the closing note's table."""
    out: dict = {}
    for e, _, d in CATALOGUE:
        n, s = out.get(e, (0, 0))
        out[e] = (n + 1, s + (d not in GENERIC))
    return out


@pytest.mark.parametrize("ex", checker.exercises(), ids=lambda e: e.id)
def test_every_exercise_has_five_specifically_diagnosed_wrong_answers(ex):
    total, specific = specific_counts().get(ex.id, (0, 0))
    assert total >= 3
    if ex.chapter in FIVE_FROM:
        assert specific >= 5, f"{ex.id}: {specific} wrong answers with a specific diagnosis, 5 wanted"


def test_the_issue_26_cases_are_catalogued():
    """The wrong answers issue 26 found passing or misdiagnosed are catalogued with their own diagnosis."""
    want = {("08.1", "never_full"), ("08.1", "ragged_ignored"), ("08.1", "strict_full_test"), ("09.2", "lse_missing"),
            ("05.2", "extra_stores_O"), ("05.2", "nothing_moved"), ("04.1", "inverted_rescale"),
            ("04.1", "block_max_uncorrected"), ("05.1", "inverted_rescale"), ("05.1", "block_max_uncorrected"),
            ("05.1", "normalised_inside"), ("05.1", "acc_factor_forgotten"), ("05.3", "stats_moved_once"),
            ("08.3", "square_blocks_formula"), ("08.3", "tile_index_diagonal"), ("12.2", "square_blocks")}
    assert want <= {(e, d) for e, _, d in CATALOGUE}


def test_final_kernel_catalogue_has_eight_distinct_diagnoses():
    assert len({d for e, _, d in CATALOGUE if e == "12.1"}) >= 8


def test_learner_error_shows_the_learners_line():
    by = {getattr(fn, "__name__", ""): (e, fn) for e, fn, _ in CATALOGUE}
    for name, needle in (("inner_typo", "qk_scal"), ("tiled_qkt_typo", "kk.T"), ("tile_dp_not_transposed", "do_i @ v_j")):
        e, fn = by[name]
        v = _check(e)(fn, quiet=True)
        assert v.diagnosis == "learner_error"
        assert "ch" in v.details["learner_where"] and ".py:" in v.details["learner_where"], v.details
        assert needle in v.details["learner_line"] and needle in v.message, v.message


def test_specs_say_what_not_how():
    for ex in checker.exercises():
        assert ex.spec and len(ex.hints) == 3
        assert ex.hints[0].rstrip().endswith("?"), f"{ex.id}: the first hint is a question"
        for formula in ("max(m, ", "e^(m", "exp(", "ceil(", "⌈", "//"):
            assert formula not in ex.spec, f"{ex.id}: the spec gives the formula ({formula!r})"


@pytest.mark.gpu
def test_final_kernel_graded_on_three_points_on_a_gpu():
    """On a GPU: output vs float64, Nsight Compute's bytes vs the kernel view, speed next to SDPA (named)."""
    from flashsim.kernels import runtime
    if runtime.interpreting():
        pytest.skip("needs a CUDA GPU")
    (fn,) = solution("12.1")
    v = exercises.check_flash_kernel(fn, quiet=True)
    assert v, v.message
    assert v.details["speed"]["sdpa_backend"] and v.details["speed"]["slowdown_vs_sdpa"] < 4.0
    assert v.details["io_exact"] in (True, None)


def test_extra_load_verdict_says_which_count_it_is():
    """On a CPU the interpreter counts the source's extra load; the verdict says so, and that a GPU may merge it."""
    from flashsim.kernels import runtime
    if not runtime.interpreting():
        pytest.skip("the interpreter's count is a CPU path")
    wrong = _load(HERE / "ch12.py")
    v = exercises.check_flash_kernel(wrong.inner_loads_k_twice, quiet=True)
    assert v.diagnosis == "extra_loads" and "interpreter counts every load" in v.message
    assert "merge a repeated load" in v.message and "✘" in str(v.table)
