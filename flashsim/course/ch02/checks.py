"""Chapter 02 exercises: the bytes standard attention moves, and how big its N×N matrices are."""
from __future__ import annotations

from typing import Callable

from flashsim.model.dtypes import dtype_bytes
from flashsim.course.ch00.checks import Verdict, run_cases

__all__ = ["check_naive_hbm_bytes", "check_score_matrix_bytes"]


def _naive_ref(n, d, dtype):
    from flashsim.model.simulator import traffic
    t = traffic("naive", n, d, dtype=dtype)
    return (t.hbm_read_bytes, t.hbm_write_bytes)


def check_naive_hbm_bytes(fn: Callable, quiet: bool = False) -> Verdict:
    """Exercise 02.1: ``fn(n, d, dtype) -> (read_bytes, write_bytes)`` of Algorithm 0's forward pass, one head,
    each GEMM reading its operands once. The expected values are :func:`flashsim.traffic`'s ("naive"); the table
    shows bytes read and written, expected against yours."""
    cases = [(1024, 64, "fp16"), (8192, 64, "fp16"), (4096, 128, "bf16"), (1000, 80, "fp32"), (1, 1, "fp16")]
    return run_cases("check_naive_hbm_bytes", fn, cases, _naive_ref,
                     header=("N, d, dtype", "expected (read, write) B", "your (read, write) B"),
                     hint="S = QKᵀ reads Q, K and writes S; softmax reads S and writes P; O = PV reads P, V and "
                          "writes O. Count each N×N and N×d tensor once per time it crosses", quiet=quiet)


def _s_ref(n, batch, heads, dtype):
    return n * n * batch * heads * dtype_bytes(dtype)


def check_score_matrix_bytes(fn: Callable, quiet: bool = False) -> Verdict:
    """Exercise 02.2: ``fn(n, batch, heads, dtype) -> bytes`` of the score matrices S of a whole attention layer:
    one N×N matrix per (batch element, head)."""
    cases = [(8192, 1, 1, "fp16"), (1024, 64, 16, "fp16"), (2048, 8, 32, "bf16"), (4096, 2, 12, "fp32")]
    return run_cases("check_score_matrix_bytes", fn, cases, _s_ref,
                     header=("N, batch, heads, dtype", "expected bytes", "your bytes"),
                     hint="N² elements per head, batch × heads heads, dtype_bytes(dtype) bytes each", quiet=quiet)
