"""Chapter 06 solutions (reference answers to :mod:`flashsim.course.ch06.checks`), plus plausible wrong answers the
tests make sure the checkers reject."""
from __future__ import annotations

__all__ = ["naive_numpy_peak_bytes", "max_context_length"]


def naive_numpy_peak_bytes(n, d):
    """Peak memory of flashsim.cpu.naive_attention_numpy on one (N, d) float32 head: S (N×N, softmaxed in place, so
    P reuses its buffer), the row max and row sum (N each), and the output O (N×d).

    Introduced in chapter 06.
    """
    return 4 * (n * n + 2 * n + n * d)


def max_context_length(capacity_bytes, d, batch_heads, elem_bytes, algo):
    """Largest N whose attention memory (chapter 06's model) fits: bisection on N over
    flashsim.widgets.attention_memory_bytes, which grows with N (4·N·d·b per head, plus 2·N²·b for standard
    attention's S and P, or 4·N for flash's fp32 logsumexp)."""
    from flashsim.course.ch06.dashboards import attention_memory_bytes

    def fits(n):
        return attention_memory_bytes(algo, n, d, batch_heads, elem_bytes) <= capacity_bytes

    lo, hi = 0, 1
    while fits(hi):          # grow until it does not fit
        lo, hi = hi, hi * 2
    while hi - lo > 1:       # invariant: fits(lo), not fits(hi)
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


# --- plausible wrong answers (tests check the checkers reject them) ------------------------------------------
def wrong_naive_numpy_peak_bytes_s_and_p(n, d):
    """Counts S and P as two N×N buffers (the numpy code softmaxes S in place)."""
    return 4 * (2 * n * n + n * d)


def wrong_naive_numpy_peak_bytes_linear(n, d):
    """Forgets S altogether: only the N×d output."""
    return 4 * n * d


def wrong_max_context_length_first_misfit(capacity_bytes, d, batch_heads, elem_bytes, algo):
    """Off by one: returns the first N that does *not* fit."""
    return max_context_length(capacity_bytes, d, batch_heads, elem_bytes, algo) + 1


def wrong_max_context_length_one_head(capacity_bytes, d, batch_heads, elem_bytes, algo):
    """Forgets that every head (and every sequence of the batch) needs its own S."""
    return max_context_length(capacity_bytes, d, 1, elem_bytes, algo)
