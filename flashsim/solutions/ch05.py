"""Chapter 05 solutions (reference answers to :mod:`flashsim.course.ch05.checks`)."""
from __future__ import annotations

import math

import numpy as np

__all__ = ["online_block_update", "flash2_forward_loop", "fa1_hbm_bytes"]

#: exercise id -> the functions that solve it (what flashsim.exercises.reveal shows)
SOLUTIONS = {"05.1": ("online_block_update",), "05.2": ("flash2_forward_loop",), "05.3": ("fa1_hbm_bytes",)}


def online_block_update(m, l, acc, s, v):
    """One K/V tile of the FA2 inner loop: grow the running max, rescale what was summed under the old max.

    Introduced in chapter 05.
    """
    m_new = np.maximum(m, s.max(axis=1))
    alpha = np.exp(m - m_new)                 # exp(-inf) = 0 on the first tile
    p = np.exp(s - m_new[:, None])
    l_new = alpha * l + p.sum(axis=1)
    acc_new = alpha[:, None] * acc + p @ v
    return m_new, l_new, acc_new


def flash2_forward_loop(mem, n, d, block_r, block_c):
    """FA2 order: the outer loop keeps Q_i (and m, l, acc) on chip while every K_j, V_j streams past once.

    Introduced in chapter 05.
    """
    scale = 1.0 / math.sqrt(d)
    for i, i0 in enumerate(range(0, n, block_r)):
        rows = slice(i0, min(i0 + block_r, n))
        qi = mem.load("Q", rows, tile=(i,))
        m = np.full(qi.shape[0], -np.inf, np.float32)
        l = np.zeros(qi.shape[0], np.float32)
        acc = np.zeros((qi.shape[0], d), np.float32)
        for j, j0 in enumerate(range(0, n, block_c)):
            cols = slice(j0, min(j0 + block_c, n))
            kj = mem.load("K", cols, tile=(j,))
            vj = mem.load("V", cols, tile=(j,))
            m, l, acc = online_block_update(m, l, acc, (qi @ kj.T) * scale, vj)
            mem.free(f"K{(j,)}", f"V{(j,)}")
        mem.store("O", acc / l[:, None], rows, tile=(i,))
        mem.free(f"Q{(i,)}")


def fa1_hbm_bytes(n, d, block_c, elem_bytes, stats_bytes):
    """Algorithm 1: K and V are read once (2Nd elements); for each of the Tc = ⌈N/Bc⌉ K/V blocks the inner loop
    reads Q and O for all N rows and writes O back (3Nd elements), and reads and writes ℓ and m (4N statistics).
    The N×d tensors take elem_bytes each, the statistics stats_bytes.

    Introduced in chapter 05.
    """
    tc = math.ceil(n / block_c)
    return (2 * n * d + tc * 3 * n * d) * elem_bytes + tc * 4 * n * stats_bytes
