"""Chapter 04 exercises: the online softmax update, the merge of two partial results, a softmax safe in fp16."""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from flashsim.course.ch00.checks import Verdict, run_cases

__all__ = ["check_online_update", "check_softmax_merge", "check_safe_softmax"]


def _update_ref(m, l, block):
    from flashsim.model.attention.online_softmax import merge, one_shot_softmax_stats
    return tuple(merge((m, l), one_shot_softmax_stats(block)))


def check_online_update(fn: Callable, quiet: bool = False) -> Verdict:
    """Exercise 04.1: ``fn(m, l, block) -> (m_new, l_new)``: fold one block of scores into the running max m and
    sum l = Σ e^(x − m). The empty state is (m, l) = (-inf, 0)."""
    cases = [(-math.inf, 0.0, (1.0, 3.0)), (3.0, math.exp(-2) + 1.0, (2.0, 5.0)), (5.0, 1.2, (0.0, 1.0, 2.0)),
             (0.0, 1.0, (4.0,)), (2.0, 3.0, (-1.0, 2.0, 8.0, 0.5))]
    return run_cases("check_online_update", lambda m, l, b: tuple(float(v) for v in fn(m, l, list(b))), cases,
                     _update_ref, rel=1e-6, header=("m, l, block", "expected (m, l)", "your (m, l)"),
                     describe=lambda m, l, b: f"m={m:g}, l={l:.4g}, block={list(b)}",
                     hint="m_new = max(m, max(block)); l_new = l·e^(m − m_new) + Σ e^(x − m_new) — the old sum was "
                          "relative to the old max, so it must be rescaled", quiet=quiet)


def _merge_ref(a, b):
    from flashsim.model.attention.online_softmax import merge
    return tuple(merge(a, b))


def check_softmax_merge(fn: Callable, quiet: bool = False) -> Verdict:
    """Exercise 04.2: ``fn((m_a, l_a), (m_b, l_b)) -> (m, l)``: combine the softmax statistics of two disjoint
    parts of a row. (-inf, 0) is an empty part."""
    cases = [((3.0, 1.135), (5.0, 1.0498)), ((5.0, 1.0), (3.0, 2.0)), ((0.0, 4.0), (0.0, 4.0)),
             ((-math.inf, 0.0), (2.0, 1.5)), ((10.0, 1.0), (-3.0, 7.0))]
    return run_cases("check_softmax_merge", lambda a, b: tuple(float(v) for v in fn(a, b)), cases, _merge_ref,
                     rel=1e-6, header=("(m_a, l_a), (m_b, l_b)", "expected (m, l)", "your (m, l)"),
                     hint="M = max(m_a, m_b); each sum is relative to its own max: l = l_a·e^(m_a − M) + "
                          "l_b·e^(m_b − M)", quiet=quiet)


_SAFE_ROWS = [(1.0, 3.0, 2.0, 5.0), (10.0, 12.0, 20.0), (-30.0, -28.0, -29.5), (0.0, 0.0, 0.0, 0.0),
              (11.5, 11.0, 3.0, 15.0, 9.0)]


def _safe_ref(row):
    x = np.asarray(row, dtype=np.float64)
    e = np.exp(x - x.max())
    return [float(v) for v in e / e.sum()]


def check_safe_softmax(fn: Callable, quiet: bool = False) -> Verdict:
    """Exercise 04.3: ``fn(x) -> p`` with x a numpy float16 array (one row of scores): the softmax computed in
    float16 throughout (no upcasting), which must stay finite for scores up to 20 (e^20 overflows fp16)."""
    def run(row):
        with np.errstate(all="ignore"):   # an overflow is reported in the verdict, not as a warning
            out = np.asarray(fn(np.asarray(row, dtype=np.float16)))
        if out.dtype != np.float16:
            raise TypeError(f"got a {out.dtype} array: compute in float16 throughout (no upcasting), as a kernel "
                            "keeping fp16 values would")
        return [float(v) for v in out.astype(np.float64).ravel()]
    return run_cases("check_safe_softmax", run, [(r,) for r in _SAFE_ROWS], _safe_ref, rel=5e-3, abs_tol=2e-3,
                     header=("x (fp16)", "expected softmax", "yours"),
                     hint="subtract the row max before np.exp: every e^(x − m) is then ≤ 1, and their sum ≤ len(x)",
                     quiet=quiet)
