"""Chapter 11 solutions: a fair reference, the merge of two partial results, and FLOPs over computed tiles."""
from __future__ import annotations

import math

import numpy as np

__all__ = ["fair_reference", "merge_partials", "flash_forward_flops"]

#: exercise id -> the functions that solve it (what flashsim.exercises.reveal shows)
SOLUTIONS = {"11.1": ("fair_reference",), "11.2": ("flash_forward_flops",), "11.3": ("merge_partials",)}


def fair_reference(q, k, v):
    """Exercise 11.1: float64 attention with the kernel's causal mask (row i attends to keys 0..i)."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    s = q @ k.T / math.sqrt(q.shape[1])
    s = np.where(np.tril(np.ones(s.shape, bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v


def merge_partials(a, b):
    """Exercise 11.3: (m, l, o) ⊕ (m, l, o) for normalised partial outputs o = Σ e^(s−m) v / l (arrays per row)."""
    m_a, l_a, o_a = a
    m_b, l_b, o_b = b
    m = np.maximum(m_a, m_b)
    wa = l_a * np.exp(m_a - m)            # rescale each part's sum to the common max
    wb = l_b * np.exp(m_b - m)
    l = wa + wb
    o = (wa[..., None] * o_a + wb[..., None] * o_b) / l[..., None]
    return m, l, o


def flash_forward_flops(n: int, d: int, block_r: int, block_c: int, causal: bool) -> int:
    """Exercise 11.2: matmul FLOPs of the flash forward over the tiles it computes (4·r·c·d per tile)."""
    flops = 0
    for i0 in range(0, n, block_r):
        r = min(block_r, n - i0)
        for j0 in range(0, n, block_c):
            if causal and j0 > min(i0 + block_r, n) - 1:   # fully masked tile: skipped
                continue
            flops += 4 * r * min(block_c, n - j0) * d
    return flops
