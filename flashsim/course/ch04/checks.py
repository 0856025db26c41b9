"""Chapter 04 exercises: the online softmax update, the merge of two partial results, a softmax safe in fp16."""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from flashsim.course.kit.checker import Suspect, Verdict, check_cases, exercise
from flashsim.model.attention.online_softmax import merge, one_shot_softmax_stats

__all__ = ["check_online_update", "check_softmax_merge", "check_safe_softmax"]

ONLINE_UPDATE = exercise(
    "04.1", "online softmax update",
    "fn(m, l, block) -> (m_new, l_new): the running max and the running sum of exponentials (relative to the "
    "running max) after one more block of scores. The empty state is (-inf, 0).",
    ("After a block with a larger score arrives, what was the old sum measured relative to?",
     "The new max is easy; the old sum must be expressed relative to it before the block's terms are added.",
     "The new max is max(m, max(block)). What factor turns a sum taken against m into one taken against the "
     "new max? Apply it to l before adding the block's terms."),
    "check_online_update")

SOFTMAX_MERGE = exercise(
    "04.2", "merge two partial softmaxes",
    "fn((m_a, l_a), (m_b, l_b)) -> (m, l): the statistics of a row from those of two disjoint parts of it. "
    "(-inf, 0) is an empty part.",
    ("Each part's sum was computed relative to its own max. Relative to what must the merged sum be?",
     "Bring both sums to the common max before adding them.",
     "Take the larger of the two maxima as the common one; each part's sum needs one factor to be relative to "
     "it."),
    "check_softmax_merge")

SAFE_SOFTMAX = exercise(
    "04.3", "softmax safe in fp16",
    "fn(x) -> p: the softmax of one float16 row of scores, computed in float16 throughout (no upcasting), finite "
    "for scores up to 20.",
    ("What is e^20 in float16?",
     "Softmax does not change when the same number is subtracted from every score. Which number makes every "
     "exponential at most 1?",
     "Shift every score by the same number so that the largest exponent is 0, then normalise as usual."),
    "check_safe_softmax")


def _e(x) -> float:
    """e^x in float64 without Python's OverflowError (inf, like the learner's numpy would give)."""
    with np.errstate(all="ignore"):
        return float(np.exp(np.float64(x)))


def _update_ref(m, l, block):
    return tuple(merge((m, l), one_shot_softmax_stats(block)))


def _as_floats(fn):
    return lambda *a: tuple(float(v) for v in fn(*a))


def check_online_update(fn: Callable, quiet: bool = False) -> Verdict:
    """Exercise 04.1 (spec: ``exercises.hint("04.1")``)."""
    cases = [(-math.inf, 0.0, (1.0, 3.0)), (3.0, math.exp(-2) + 1.0, (2.0, 5.0)), (5.0, 1.2, (0.0, 1.0, 2.0)),
             (0.0, 1.0, (4.0,)), (2.0, 3.0, (-1.0, 2.0, 8.0, 0.5))]

    def no_rescale(m, l, b):
        mn = max(m, max(b))
        return mn, l + sum(math.exp(x - mn) for x in b)
    def ex(x):
        return float(np.exp(np.float64(x)))

    def inverted(m, l, b):
        mn = max(m, max(b))
        return mn, l * ex(mn - m) + sum(ex(x - mn) for x in b)

    def block_max(m, l, b):
        mn, mb = max(m, max(b)), max(b)
        return mn, l * ex(m - mn) + sum(ex(x - mb) for x in b)

    def old_dropped(m, l, b):
        mn = max(m, max(b))
        return mn, sum(ex(x - mn) for x in b)

    def max_reset(m, l, b):
        mb = max(b)
        return mb, l * ex(m - mb) + sum(ex(x - mb) for x in b)
    suspects = (Suspect("missing_rescale", no_rescale, "your new sum adds the block to the old sum unchanged: "
                        "the old sum was relative to the old max, and the max grew"),
                Suspect("no_max_subtraction", lambda m, l, b: (max(m, max(b)), l + sum(math.exp(x) for x in b)),
                        "your sum adds e^x: every term must be relative to the running max"),
                Suspect("inverted_rescale", inverted, "your old sum is multiplied by e^(m_new − m), the inverse of "
                        "the rescale: when the max grows, the old terms shrink relative to it (and from the empty "
                        "state 0·e^(+inf) is NaN)"),
                Suspect("block_max_uncorrected", block_max, "the block's terms are taken against the block's own "
                        "max and added without the factor e^(max(block) − m_new) that brings them to the running "
                        "max"),
                Suspect("old_sum_dropped", old_dropped, "your new sum holds the block's terms only: the old sum l "
                        "(rescaled) must be kept"),
                Suspect("running_max_reset", max_reset, "your new max is the block's max alone: a running max "
                        "never goes down, so it is max(m, max(block))"))
    return check_cases(ONLINE_UPDATE, _as_floats(lambda m, l, b: fn(m, l, list(b))), cases,
                       _update_ref, rel=1e-6, header=("m, l, block", "expected (m, l)", "your (m, l)"),
                       describe=lambda m, l, b: f"m={m:g}, l={l:.4g}, block={list(b)}", suspects=suspects,
                       quiet=quiet)


def _merge_ref(a, b):
    return tuple(merge(a, b))


def check_softmax_merge(fn: Callable, quiet: bool = False) -> Verdict:
    """Exercise 04.2 (spec: ``exercises.hint("04.2")``)."""
    cases = [((3.0, 1.135), (5.0, 1.0498)), ((5.0, 1.0), (3.0, 2.0)), ((0.0, 4.0), (0.0, 4.0)),
             ((-math.inf, 0.0), (2.0, 1.5)), ((10.0, 1.0), (-3.0, 7.0))]
    suspects = (Suspect("missing_rescale", lambda a, b: (max(a[0], b[0]), a[1] + b[1]),
                        "your merged sum adds the two sums as they are: each is relative to its own max"),
                Suspect("one_side_rescaled", lambda a, b: (max(a[0], b[0]), a[1] * math.exp(a[0] - max(a[0], b[0]))
                                                           + b[1]),
                        "only the first part's sum is rescaled: the second part's max can be the smaller one too"),
                Suspect("inverted_rescale", lambda a, b: (max(a[0], b[0]), _e(max(a[0], b[0]) - a[0]) * a[1]
                                                          + _e(max(a[0], b[0]) - b[0]) * b[1]),
                        "each sum is multiplied by e^(M − m_x), the inverse of the rescale: relative to a larger "
                        "max every term gets smaller"),
                Suspect("rescaled_to_other_max", lambda a, b: (max(a[0], b[0]), a[1] * _e(a[0] - b[0])
                                                               + b[1] * _e(b[0] - a[0])),
                        "each sum is brought to the *other* part's max: both must go to the common max "
                        "M = max(m_a, m_b)"),
                Suspect("min_not_max", lambda a, b: (min(a[0], b[0]), a[1] * _e(a[0] - min(a[0], b[0]))
                                                     + b[1] * _e(b[0] - min(a[0], b[0]))),
                        "your merged max is the smaller one: relative to it the other part's terms exceed 1 and "
                        "can overflow (an empty part's −inf makes everything infinite)"))
    return check_cases(SOFTMAX_MERGE, _as_floats(fn), cases, _merge_ref, rel=1e-6,
                       header=("(m_a, l_a), (m_b, l_b)", "expected (m, l)", "your (m, l)"), suspects=suspects,
                       quiet=quiet)


_UPCAST = "a float32 array (compute in float16 throughout: no upcasting)"
_SAFE_ROWS = [(1.0, 3.0, 2.0, 5.0), (10.0, 12.0, 20.0), (-30.0, -28.0, -29.5), (0.0, 0.0, 0.0, 0.0),
              (11.5, 11.0, 3.0, 15.0, 9.0), (-20.0, 20.0, 0.0, 0.0)]


def _safe_ref(row):
    x = np.asarray(row, dtype=np.float64)
    e = np.exp(x - x.max())
    return [float(v) for v in e / e.sum()]


def check_safe_softmax(fn: Callable, quiet: bool = False) -> Verdict:
    """Exercise 04.3 (spec: ``exercises.hint("04.3")``): float16 output, within fp16 rounding of the exact
    softmax."""
    def run(row):
        out = np.asarray(fn(np.asarray(row, dtype=np.float16)))
        if out.dtype != np.float16:
            return _UPCAST if out.dtype == np.float32 else f"a {out.dtype} array (compute in float16 throughout)"
        return [float(v) for v in out.astype(np.float64).ravel()]

    def by_max(row):
        x = np.asarray(row, np.float64)
        e = np.exp(x - x.max())
        return [float(v) for v in e / e.max()]
    def fp16(row, shift):
        x = np.asarray(row, np.float16)
        with np.errstate(all="ignore"):
            e = np.exp(x - shift(x))
            return [float(v) for v in (e / e.sum()).astype(np.float64)]
    suspects = (Suspect("normalised_by_max", by_max, "your row is divided by its largest term, not by the sum: "
                        "a softmax sums to 1"),
                Suspect("subtracted_min", lambda row: fp16(row, np.min), "you subtract the row's smallest score: "
                        "then the largest exponential is e^(max − min), which overflows float16 for a wide row. "
                        "Which shift makes every exponent ≤ 0?"),
                Suspect("no_max_subtraction", lambda row: fp16(row, lambda x: np.float16(0)),
                        "e^x overflows float16 for scores above ~11 (e^11.1 > 65504), so the row becomes inf/NaN: "
                        "which number can be subtracted from every score without changing the softmax?"),
                Suspect("upcast", lambda row: _UPCAST, "your result is float32: the spec asks for float16 "
                        "throughout, so that the overflow is yours to avoid (no upcasting)"),
                Suspect("subtracted_mean", lambda row: fp16(row, np.mean), "you subtract the row's mean: "
                        "a score 20 above the mean still gives e^20, which overflows float16. Which shift makes "
                        "every exponent ≤ 0?"))
    return check_cases(SAFE_SOFTMAX, run, [(r,) for r in _SAFE_ROWS], _safe_ref, rel=5e-3, abs_tol=2e-3,
                       header=("x (fp16)", "expected softmax", "yours"), suspects=suspects, quiet=quiet)
