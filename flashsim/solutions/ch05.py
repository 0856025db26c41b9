"""Chapter 05 solutions (reference answers to :mod:`flashsim.course.ch05.checks`), plus the plausible wrong answers
the tests make sure the checkers reject."""
from __future__ import annotations

import math

import numpy as np

__all__ = ["online_block_update", "flash2_forward_loop", "fa1_hbm_bytes"]


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


def fa1_hbm_bytes(n, d, block_c, elem_bytes):
    """Algorithm 1: K and V are read once (2Nd); for each of the Tc = ⌈N/Bc⌉ K/V blocks the inner loop reads Q,
    O, l, m for all N rows (2Nd + 2N) and writes O, l, m back (Nd + 2N).

    Introduced in chapter 05.
    """
    tc = math.ceil(n / block_c)
    return (2 * n * d + tc * (3 * n * d + 4 * n)) * elem_bytes


# --- plausible wrong answers (tests check the checkers reject them) ------------------------------------------
def wrong_online_block_update_no_rescale(m, l, acc, s, v):
    """Forgets to rescale acc and l when the running max grows."""
    m_new = np.maximum(m, s.max(axis=1))
    p = np.exp(s - m_new[:, None])
    return m_new, l + p.sum(axis=1), acc + p @ v


def wrong_flash2_forward_loop_q_in_inner_loop(mem, n, d, block_r, block_c):
    """Right output, FA1-like traffic: reloads Q_i for every K/V tile."""
    scale = 1.0 / math.sqrt(d)
    for i, i0 in enumerate(range(0, n, block_r)):
        rows = slice(i0, min(i0 + block_r, n))
        r = rows.stop - rows.start
        m, l, acc = np.full(r, -np.inf, np.float32), np.zeros(r, np.float32), np.zeros((r, d), np.float32)
        for j, j0 in enumerate(range(0, n, block_c)):
            qi = mem.load("Q", rows, tile=(i,))
            cols = slice(j0, min(j0 + block_c, n))
            kj, vj = mem.load("K", cols, tile=(j,)), mem.load("V", cols, tile=(j,))
            m, l, acc = online_block_update(m, l, acc, (qi @ kj.T) * scale, vj)
            mem.free(f"K{(j,)}", f"V{(j,)}", f"Q{(i,)}")
        mem.store("O", acc / l[:, None], rows, tile=(i,))


def wrong_flash2_forward_loop_off_by_one(mem, n, d, block_r, block_c):
    """Off-by-one block: ``range(n // block_r)`` drops the ragged last row block."""
    scale = 1.0 / math.sqrt(d)
    for i in range(n // block_r):
        rows = slice(i * block_r, (i + 1) * block_r)
        qi = mem.load("Q", rows, tile=(i,))
        m, l, acc = np.full(block_r, -np.inf, np.float32), np.zeros(block_r, np.float32), np.zeros((block_r, d),
                                                                                                     np.float32)
        for j, j0 in enumerate(range(0, n, block_c)):
            cols = slice(j0, min(j0 + block_c, n))
            kj, vj = mem.load("K", cols, tile=(j,)), mem.load("V", cols, tile=(j,))
            m, l, acc = online_block_update(m, l, acc, (qi @ kj.T) * scale, vj)
            mem.free(f"K{(j,)}", f"V{(j,)}")
        mem.store("O", acc / l[:, None], rows, tile=(i,))
        mem.free(f"Q{(i,)}")


def wrong_fa1_hbm_bytes_floor(n, d, block_c, elem_bytes):
    """Off-by-one block: Tc = N // Bc misses the ragged last K/V block."""
    tc = n // block_c
    return (2 * n * d + tc * (3 * n * d + 4 * n)) * elem_bytes


def wrong_fa1_hbm_bytes_no_stats(n, d, block_c, elem_bytes):
    """Forgets the m and l round trips (the 4N term)."""
    return (2 * n * d + math.ceil(n / block_c) * 3 * n * d) * elem_bytes
