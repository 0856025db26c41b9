"""Chapter 06 solutions (reference answers to :mod:`flashsim.course.ch06.checks`)."""
from __future__ import annotations

from flashsim.model.attention.memory_model import attention_memory_bytes

__all__ = ["naive_numpy_peak_bytes", "max_context_length"]

#: exercise id -> the functions that solve it (what flashsim.exercises.reveal shows)
SOLUTIONS = {"06.1": ("naive_numpy_peak_bytes",), "06.2": ("max_context_length",)}


def naive_numpy_peak_bytes(n, d):
    """Peak memory of flashsim.cpu.naive_attention_numpy on one (N, d) float32 head: S (N×N, softmaxed in place, so
    P reuses its buffer), the row max and row sum (N each), and the output O (N×d).

    Introduced in chapter 06.
    """
    return 4 * (n * n + 2 * n + n * d)


def max_context_length(capacity_bytes, d, batch_heads, elem_bytes, algo):
    """Largest N whose attention memory (chapter 06's model, flashsim.model.attention.memory_model) fits: grow N
    until it does not fit, then bisect (the memory grows with N)."""
    def fits(n):
        return attention_memory_bytes(algo, n, d, batch_heads, elem_bytes) <= capacity_bytes

    lo, hi = 0, 1
    while fits(hi):          # grow until it does not fit
        lo, hi = hi, hi * 2
    while hi - lo > 1:       # invariant: fits(lo), not fits(hi)
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo
