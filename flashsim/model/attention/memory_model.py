"""The peak-memory model of one attention layer: what it holds in device memory at once (chapters 06 and 10).

Standard attention (Algorithm 0) materializes the N×N scores S and probabilities P; FlashAttention holds only
O(N) statistics. That difference, not the bytes moved, is what decides the longest context that fits a GPU:

    every algorithm      Q, K, V, O                    4·N·d·b  per head          (:func:`io_bytes`)
    standard attention   + S and P                     2·N²·b   per head          (:func:`score_matrix_bytes`)
    FlashAttention       + the logsumexp L (fp32)      4·N      per head          (:func:`logsumexp_bytes`)

b is the bytes of the storage dtype. ``score_matrices`` says how many N×N matrices an implementation holds at
its peak: a framework's eager attention keeps S and P (2, the chapter 06 default); a numpy implementation that
overwrites S with P in place holds one (``flashsim.cpu.naive_attention_numpy``: 1 float32 matrix).

>>> attention_memory_bytes("naive", 1024, 64) - attention_memory_bytes("flash", 1024, 64)
4190208
>>> max_context_for(141e9, "naive", 128, batch_heads=32)
33062
"""
from __future__ import annotations

import math

from flashsim.errors import FlashsimError

__all__ = ["STANDARD_ALGOS", "FLASH_ALGOS", "attention_memory_bytes", "io_bytes", "logsumexp_bytes",
           "max_context_for", "score_matrix_bytes"]

STANDARD_ALGOS = ("naive", "standard", "eager")
FLASH_ALGOS = ("flash", "flash1", "flash2")
LSE_BYTES = 4  # the logsumexp is fp32


def io_bytes(n: int, d: int, batch_heads: int = 1, elem_bytes: int = 2) -> int:
    """Q, K, V and O: 4·N·d·b per head."""
    return int(batch_heads * 4 * n * d * elem_bytes)


def score_matrix_bytes(n: int, batch_heads: int = 1, elem_bytes: int = 2, score_matrices: int = 2) -> int:
    """The N×N matrices standard attention holds at once: score_matrices·N²·b per head (S and P: 2)."""
    return int(batch_heads * score_matrices * n * n * elem_bytes)


def logsumexp_bytes(n: int, batch_heads: int = 1) -> int:
    """FlashAttention's extra state: the logsumexp L, N fp32 numbers per head (kept for the backward)."""
    return int(batch_heads * LSE_BYTES * n)


def _kind(algo: str) -> str:
    if algo in STANDARD_ALGOS:
        return "standard"
    if algo in FLASH_ALGOS:
        return "flash"
    raise FlashsimError(f"algo={algo!r}: use 'naive' (standard attention) or 'flash'")


def attention_memory_bytes(algo: str, n: int, d: int, batch_heads: int = 1, elem_bytes: int = 2, *,
                           score_matrices: int = 2) -> int:
    """Bytes one attention layer holds in device memory at its peak: :func:`io_bytes` plus the N×N matrices
    (standard) or the logsumexp (flash)."""
    extra = (score_matrix_bytes(n, batch_heads, elem_bytes, score_matrices) if _kind(algo) == "standard"
             else logsumexp_bytes(n, batch_heads))
    return io_bytes(n, d, batch_heads, elem_bytes) + extra


def max_context_for(capacity_bytes: float, algo: str, d: int, batch_heads: int = 1, elem_bytes: int = 2, *,
                    score_matrices: int = 2) -> int:
    """Largest N with attention_memory_bytes(algo, N, ...) ≤ capacity_bytes (solves the quadratic, then steps)."""
    kw = dict(score_matrices=score_matrices)
    c = capacity_bytes / batch_heads
    if _kind(algo) == "standard":
        a, b = score_matrices * elem_bytes, 4 * d * elem_bytes
        n = int((-b + math.sqrt(b * b + 4 * a * c)) / (2 * a))
    else:
        n = int(c // (4 * d * elem_bytes + LSE_BYTES))
    while attention_memory_bytes(algo, n + 1, d, batch_heads, elem_bytes, **kw) <= capacity_bytes:
        n += 1
    while n > 0 and attention_memory_bytes(algo, n, d, batch_heads, elem_bytes, **kw) > capacity_bytes:
        n -= 1
    return n
