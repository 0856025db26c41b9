"""Chapter 02 exercises: the bytes standard attention moves, and how big its N×N matrices are."""
from __future__ import annotations

from typing import Callable

from flashsim.course.kit.checker import Suspect, Verdict, check_cases, exercise
from flashsim.model.dtypes import dtype_bytes
from flashsim.model.simulator import traffic

__all__ = ["check_naive_hbm_bytes", "check_score_matrix_bytes"]

NAIVE_HBM_BYTES = exercise(
    "02.1", "Algorithm 0's HBM bytes, S and P in fp32",
    "fn(n, d, dtype) -> (read_bytes, write_bytes) of Algorithm 0's forward pass for one head when Q, K, V and O "
    "are stored in dtype but the N×N matrices S and P are kept in fp32 (as mixed-precision code and the course's "
    "naive kernel keep them), each of its three steps reading its operands from HBM and writing its result back.",
    ("Which tensors in the chapter's byte table are N×d, and which are N×N?",
     "Keep the chapter's count of how often each tensor crosses HBM; only the element size of some tensors "
     "changes. Which ones?",
     "give every S and P term 4 bytes per element and every Q, K, V, O term dtype_bytes(dtype), then add reads "
     "and writes separately"),
    "check_naive_hbm_bytes")

SCORE_MATRIX_BYTES = exercise(
    "02.2", "score matrices of a layer",
    "fn(n, batch, heads, dtype) -> bytes of all score matrices S of one attention layer.",
    ("How many score matrices does a layer with a batch of sequences and several heads build?",
     "One N×N matrix per (sequence, head), each element dtype_bytes(dtype) bytes.",
     "Multiply one head's S bytes by the number of (sequence, head) pairs in the layer."),
    "check_score_matrix_bytes")


def _naive_ref(n, d, dtype):
    """The simulator's naive count per tensor: Q, K, V, O in `dtype`, S and P from the fp32 count."""
    t, t32 = traffic("naive", n, d, dtype=dtype), traffic("naive", n, d, dtype="fp32")

    def pick(mine, fp32):
        return sum(fp32[k] if k in ("S", "P") else v for k, v in mine.items())
    return (pick(t.read_bytes_by_tensor, t32.read_bytes_by_tensor),
            pick(t.write_bytes_by_tensor, t32.write_bytes_by_tensor))


def check_naive_hbm_bytes(fn: Callable, quiet: bool = False) -> Verdict:
    """Exercise 02.1, graded against :func:`flashsim.traffic`'s "naive" count per tensor (S and P at fp32)."""
    cases = [(1024, 64, "fp16"), (8192, 64, "fp16"), (4096, 128, "bf16"), (1000, 80, "fp32"), (1, 1, "fp16")]

    def b(dt):
        return dtype_bytes(dt)

    def count(n, d, dt, *, nn=4, reads_nn=2, writes_nn=2, nd=None):
        e = b(dt) if nd is None else nd
        return ((3 * n * d) * e + reads_nn * n * n * nn, writes_nn * n * n * nn + n * d * e)
    suspects = (Suspect("sp_in_storage_dtype", lambda n, d, dt: count(n, d, dt, nn=b(dt)),
                        "your S and P bytes use dtype's element size: here S and P are kept in fp32, 4 bytes each"),
                Suspect("all_fp32", lambda n, d, dt: count(n, d, dt, nd=4),
                        "your Q, K, V and O are counted in fp32 too: only S and P are kept in fp32"),
                Suspect("no_intermediates", lambda n, d, dt: (3 * n * d * b(dt), n * d * b(dt)),
                        "your bytes count Q, K, V and O only: the N×N matrices cross HBM too"),
                Suspect("softmax_not_counted", lambda n, d, dt: count(n, d, dt, reads_nn=1, writes_nn=1),
                        "your bytes miss one N×N read and one N×N write: the softmax step is a pass over HBM too"),
                Suspect("reads_writes_swapped", lambda n, d, dt: _naive_ref(n, d, dt)[::-1],
                        "your reads are the writes and the other way round"),
                Suspect("p_not_read", lambda n, d, dt: count(n, d, dt, reads_nn=1),
                        "your reads leave out P: the third step reads P (and V) to compute O = P V"))
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
