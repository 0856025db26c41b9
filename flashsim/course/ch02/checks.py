"""Chapter 02 exercises: the bytes standard attention moves, and how big its N×N matrices are."""
from __future__ import annotations

from typing import Callable

from flashsim.course.kit.checker import Suspect, Verdict, check_cases, exercise
from flashsim.model.dtypes import dtype_bytes
from flashsim.model.simulator import traffic

__all__ = ["check_naive_hbm_bytes", "check_score_matrix_bytes"]

NAIVE_HBM_BYTES = exercise(
    "02.1", "standard attention's HBM bytes",
    "fn(n, d, dtype) -> (read_bytes, write_bytes) of Algorithm 0's forward pass for one head, each of its three "
    "steps reading its operands from HBM and writing its result back.",
    ("Algorithm 0 has three steps. What does each one read, and what does it write?",
     "List the tensors of each step with their shapes: N×d ones and N×N ones. A tensor crosses HBM once each time "
     "a step reads or writes it.",
     "reads = (3·N·d + 2·N²)·b (Q, K; S; P, V), writes = (2·N² + N·d)·b (S; P; O)"),
    "check_naive_hbm_bytes")

SCORE_MATRIX_BYTES = exercise(
    "02.2", "score matrices of a layer",
    "fn(n, batch, heads, dtype) -> bytes of all score matrices S of one attention layer.",
    ("How many score matrices does a layer with a batch of sequences and several heads build?",
     "One N×N matrix per (sequence, head), each element dtype_bytes(dtype) bytes.",
     "bytes = N² · batch · heads · dtype_bytes(dtype)"),
    "check_score_matrix_bytes")


def _naive_ref(n, d, dtype):
    t = traffic("naive", n, d, dtype=dtype)
    return (t.hbm_read_bytes, t.hbm_write_bytes)


def check_naive_hbm_bytes(fn: Callable, quiet: bool = False) -> Verdict:
    """Exercise 02.1, graded against :func:`flashsim.traffic`'s "naive" count."""
    cases = [(1024, 64, "fp16"), (8192, 64, "fp16"), (4096, 128, "bf16"), (1000, 80, "fp32"), (1, 1, "fp16")]

    def b(dt):
        return dtype_bytes(dt)
    suspects = (Suspect("no_intermediates", lambda n, d, dt: (3 * n * d * b(dt), n * d * b(dt)),
                        "your bytes count Q, K, V and O only: the N×N matrices cross HBM too"),
                Suspect("softmax_not_counted", lambda n, d, dt: ((3 * n * d + n * n) * b(dt), (n * n + n * d) * b(dt)),
                        "your bytes miss one N×N read and one N×N write: the softmax step is a pass over HBM too"),
                Suspect("reads_writes_swapped", lambda n, d, dt: _naive_ref(n, d, dt)[::-1],
                        "your reads are the writes and the other way round"))
    return check_cases(NAIVE_HBM_BYTES, fn, cases, _naive_ref,
                       header=("N, d, dtype", "expected (read, write) B", "your (read, write) B"),
                       suspects=suspects, quiet=quiet)


def _s_ref(n, batch, heads, dtype):
    return n * n * batch * heads * dtype_bytes(dtype)


def check_score_matrix_bytes(fn: Callable, quiet: bool = False) -> Verdict:
    """Exercise 02.2 (spec: ``exercises.hint("02.2")``)."""
    cases = [(8192, 1, 1, "fp16"), (1024, 64, 16, "fp16"), (2048, 8, 32, "bf16"), (4096, 2, 12, "fp32")]
    suspects = (Suspect("one_head", lambda n, bt, h, dt: n * n * bt * dtype_bytes(dt),
                        "your bytes are one head's: every head builds its own S"),
                Suspect("no_batch", lambda n, bt, h, dt: n * n * h * dtype_bytes(dt),
                        "your bytes are one sequence's: every sequence of the batch builds its own S"),
                Suspect("n_times_d", lambda n, bt, h, dt: n * 64 * bt * h * dtype_bytes(dt),
                        "your bytes grow as N, not N²: S is N×N"),
                Suspect("s_and_p", lambda n, bt, h, dt: 2 * _s_ref(n, bt, h, dt),
                        "your bytes count S and P: the spec asks for the score matrices S alone"),
                Suspect("elements_not_bytes", lambda n, bt, h, dt: n * n * bt * h,
                        "your answers count elements: how many bytes does each take in this dtype?"))
    return check_cases(SCORE_MATRIX_BYTES, fn, cases, _s_ref,
                       header=("N, batch, heads, dtype", "expected B", "your B"), suspects=suspects, quiet=quiet)
