"""Chapter 06 solutions (reference answers to :mod:`flashsim.course.ch06.checks`)."""
from __future__ import annotations

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
    """Largest N whose attention memory (chapter 06's model) fits: grow N until it does not fit, then bisect.
    The model: every head holds Q, K, V, O (4·N·d·b), plus S and P for standard attention (2·N²·b) or the fp32
    logsumexp for flash (4·N)."""
    def fits(n):
        extra = 2 * n * n * elem_bytes if algo == "naive" else 4 * n
        return batch_heads * (4 * n * d * elem_bytes + extra) <= capacity_bytes

    lo, hi = 0, 1
    while fits(hi):          # grow until it does not fit
        lo, hi = hi, hi * 2
    while hi - lo > 1:       # invariant: fits(lo), not fits(hi)
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo
