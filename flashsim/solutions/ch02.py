"""Solutions of chapter 02's exercises (Standard attention and its traffic)."""
from __future__ import annotations

from flashsim.model.dtypes import dtype_bytes

__all__ = ["naive_hbm_bytes", "score_matrix_bytes"]

#: exercise id -> the functions that solve it (what flashsim.exercises.reveal shows)
SOLUTIONS = {"02.1": ("naive_hbm_bytes",), "02.2": ("score_matrix_bytes",)}


def naive_hbm_bytes(n, d, dtype):
    """Exercise 02.1: reads Q, K (S = QKᵀ), S (softmax), P and V (O = PV); writes S, P, O. The N×d tensors take
    dtype's element size, the N×N matrices S and P 4 bytes (fp32)."""
    b = dtype_bytes(dtype)
    reads = 3 * n * d * b + 2 * n * n * 4
    writes = 2 * n * n * 4 + n * d * b
    return reads, writes


def score_matrix_bytes(n, batch, heads, dtype):
    """Exercise 02.2: N² elements per head."""
    return n * n * batch * heads * dtype_bytes(dtype)
