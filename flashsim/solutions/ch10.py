"""Chapter 10 solutions: the working set of one step of the CPU kernel, and a blocked attention in numpy."""
from __future__ import annotations

import math

import numpy as np

__all__ = ["step_working_set_bytes", "blocked_attention_numpy"]

#: exercise id -> the functions that solve it (what flashsim.exercises.reveal shows)
SOLUTIONS = {"10.1": ("blocked_attention_numpy",), "10.2": ("step_working_set_bytes",)}


def step_working_set_bytes(block_r: int, block_c: int, d: int) -> int:
    """Exercise 10.2: float32 bytes one inner-loop step touches: Q block + accumulator, K and V blocks, S tile.

    d is padded to a multiple of 16 (one AVX-512 vector of float32), as :mod:`flashsim.cpu` stores it.
    """
    dp = -(-d // 16) * 16
    return 4 * (2 * block_r * dp + 2 * block_c * dp + block_r * block_c)


def blocked_attention_numpy(q, k, v, block: int = 64):
    """Exercise 10.1: FlashAttention forward in numpy, float32, blocks over Q and over K/V, online softmax.

    Extra memory: one (block x block) score tile, one accumulator and two row vectors, plus the output.
    """
    n, d = q.shape
    scale = np.float32(1.0 / math.sqrt(d))
    out = np.empty((n, d), np.float32)
    for i in range(0, n, block):
        qi = q[i:i + block] * scale                        # (Br, d)
        m = np.full(qi.shape[0], -np.inf, np.float32)      # running max
        l = np.zeros(qi.shape[0], np.float32)              # running sum
        acc = np.zeros((qi.shape[0], d), np.float32)       # running unnormalised output
        for j in range(0, n, block):
            s = qi @ k[j:j + block].T                      # (Br, Bc) score tile
            m_new = np.maximum(m, s.max(axis=1))
            p = np.exp(s - m_new[:, None])
            alpha = np.exp(m - m_new)                      # the rescale
            l = l * alpha + p.sum(axis=1)
            acc = acc * alpha[:, None] + p @ v[j:j + block]
            m = m_new
        out[i:i + block] = acc / l[:, None]
    return out
