"""Chapter 06 exercises: memory — predict what the naive implementation allocates (checked against a measurement),
and how long a context fits.

The tables these checkers print are memory tables (bytes held at the peak, predicted vs measured or vs the model),
not traffic: chapter 06 is about what sits in memory, not what moves.
"""
from __future__ import annotations

import numpy as np

from flashsim.course.kit.checker import (LearnerError, Suspect, Verdict, call_learner, check_cases, error_verdict,
                                         exercise, verdict)
from flashsim.cpu import naive_attention_numpy
from flashsim.measure.peak_memory import peak_memory_cpu
from flashsim.model.attention.memory_model import max_context_for
from flashsim.model.hardware import HBM_CAPACITY_BYTES
from flashsim.model.table import Table

__all__ = ["check_naive_numpy_peak_bytes", "check_max_context_length"]

NAIVE_PEAK = exercise(
    "06.1", "the naive implementation's peak memory",
    "fn(n, d) -> bytes: the peak memory flashsim.cpu.naive_attention_numpy allocates on one float32 (N, d) head. "
    "The checker measures it (tracemalloc) and accepts predictions within 3 %.",
    ("Which arrays does naive_attention_numpy create, and which of them exist at the same moment?",
     "Read its source (inspect.getsource): is the softmax computed into a new array or in place?",
     "Only one N×N array is alive at a time (the softmax works in place): list what else exists while it "
     "does, in float32."),
    "check_naive_numpy_peak_bytes")

MAX_CONTEXT = exercise(
    "06.2", "the longest context that fits",
    "fn(capacity_bytes, d, batch_heads, elem_bytes, algo) -> N: the largest N whose attention memory (chapter 06's "
    "model) fits in capacity_bytes, for algo 'naive' or 'flash'.",
    ("The memory grows with N. How do you find the last N below a limit without trying every N?",
     "Chapter 06's model counts Q, K, V, O for every head, plus S and P (naive) or the logsumexp (flash); grow N "
     "until it no longer fits, then bisect.",
     "Write bytes(N) from the model, double N until it no longer fits, then bisect between the last N that "
     "fits and the first that does not."),
    "check_max_context_length")


def _largest_n(cap, d, bh, b, algo) -> int:
    return max_context_for(cap, algo, d, bh, b)


#: predictions learners make for 06.1, each a formula in (N, d), and what each leaves out or adds
_PEAK_SUSPECTS = (
    (("two_nxn_buffers", "you count two N×N buffers (S and P): the softmax is computed in place, so one exists at a "
      "time"), lambda n, d: 4 * (2 * n * n + 2 * n + n * d)),
    (("two_bytes_per_float", "your bytes are half the measurement: the arrays are float32, 4 bytes an element"),
     lambda n, d: 2 * (n * n + 2 * n + n * d)),
    (("float64_assumed", "your bytes are twice the measurement: the arrays are float32, not float64"),
     lambda n, d: 8 * (n * n + 2 * n + n * d)),
    (("inputs_counted", "you count Q, K and V: they exist before the call, and the measurement is what the function "
      "allocates"), lambda n, d: 4 * (n * n + 2 * n + 4 * n * d)),
    (("output_missing", "you leave out the output O (N×d): it is allocated while S still exists"),
     lambda n, d: 4 * (n * n + 2 * n)),
)


def check_naive_numpy_peak_bytes(fn, ns=(256, 512, 1024, 2048), d: int = 64, rel_tol: float = 0.03,
                                 quiet: bool = False) -> Verdict:
    """Exercise 06.1: predictions against :func:`flashsim.measure.peak_memory.peak_memory_cpu` (tracemalloc)."""
    rng = np.random.default_rng(0)
    rows, ratios = [], []
    for n in ns:
        q, k, v = (rng.standard_normal((n, d), dtype=np.float32) for _ in range(3))
        measured = peak_memory_cpu(naive_attention_numpy, q, k, v, method="tracemalloc")
        try:
            got = int(call_learner(fn, n, d))
        except LearnerError as err:
            return error_verdict(NAIVE_PEAK, err, f"N={n}, d={d}", quiet=quiet)
        ratios.append(got / measured)
        rows.append([n, got, measured, f"{got / measured - 1:+.1%}", "✔" if abs(got / measured - 1) <= rel_tol
                     else "✘"])
    table = Table(["N", "your bytes", "measured bytes", "difference", "ok"], rows)
    worst = max(abs(r - 1) for r in ratios)
    if worst <= rel_tol:
        return verdict(NAIVE_PEAK, True, f"within {worst:.1%} of tracemalloc's measurement at every N: the N² term "
                       "is it", table=table, worst=worst, quiet=quiet)
    last = ratios[-1]
    preds = [r[1] for r in rows]
    exact = [key_why for key_why, model in _PEAK_SUSPECTS if all(abs(p - model(n_, d)) <= 0.001 * model(n_, d)
                                                                  for p, n_ in zip(preds, ns))]
    if exact:
        key, why = exact[0]
    elif abs(last - 2) < 0.1:
        key, why = "two_nxn_buffers", ("at large N you predict twice the measurement: you count two N×N buffers "
                                       "where one exists at a time")
    elif last < 0.2 and ratios[0] > last:
        key, why = "no_n2_term", "your prediction falls further behind as N grows: the N×N term is missing"
    elif max(ratios) - min(ratios) < 0.02:
        key, why = "constant_factor", (f"every prediction is {last:.3g}× the measurement: a constant factor (the "
                                       "element size?) is off")
    else:
        key, why = "mismatch", "the predictions follow neither the measurement nor a constant multiple of it"
    return verdict(NAIVE_PEAK, False, f"off by up to {worst:.0%} from the measured peak (✘ rows): {why}",
                   diagnosis=key, table=table, worst=worst, quiet=quiet)


def check_max_context_length(fn, quiet: bool = False) -> Verdict:
    """Exercise 06.2: for both algorithms, against the largest N of chapter 06's memory model."""
    cases = [(HBM_CAPACITY_BYTES["h200"], 128, 32, 2, algo) for algo in ("naive", "flash")] + \
            [(HBM_CAPACITY_BYTES["a100"], 64, 16 * 8, 2, algo) for algo in ("naive", "flash")] + \
            [(HBM_CAPACITY_BYTES["t4"], 64, 1, 4, algo) for algo in ("naive", "flash")] + \
            [(10**6, 16, 3, 2, algo) for algo in ("naive", "flash")]
    suspects = (Suspect("elem_bytes_ignored", lambda c, d, bh, b, a: _largest_n(c, d, bh, 1, a),
                        "your N counts elements, not bytes: each element takes elem_bytes"),
                Suspect("one_nxn_matrix", lambda c, d, bh, b, a: max_context_for(c, a, d, bh, b, score_matrices=1),
                        "your naive N holds one N×N matrix: standard attention holds S and P at once"),
                Suspect("first_misfit", lambda c, d, bh, b, a: _largest_n(c, d, bh, b, a) + 1,
                        "each of your N is one too large: it is the first N that no longer fits"),
                Suspect("one_head", lambda c, d, bh, b, a: _largest_n(c, d, 1, b, a),
                        "your N fits one head: every head of every sequence holds its own tensors"),
                Suspect("algo_ignored", lambda c, d, bh, b, a: _largest_n(c, d, bh, b, "flash"),
                        "your N is flash's for both algorithms: standard attention also holds S and P"))
    return check_cases(MAX_CONTEXT, fn, cases, _largest_n,
                       header=("capacity B, d, heads, b, algo", "largest N", "your N"),
                       describe=lambda c, d, bh, b, a: f"{c / 1e9:g} GB, d={d}, {bh} heads, b={b}, {a}",
                       suspects=suspects, quiet=quiet)
