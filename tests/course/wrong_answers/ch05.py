"""Wrong answers learners write for chapter 05, each with the diagnosis its checker must give."""
import math

import numpy as np


def update_no_rescale(m, l, acc, s, v):
    """Forgets to rescale acc and l when the running max grows."""
    m_new = np.maximum(m, s.max(axis=1))
    p = np.exp(s - m_new[:, None])
    return m_new, l + p.sum(axis=1), acc + p @ v


def update_no_max(m, l, acc, s, v):
    """No running max: e^s overflows on large scores."""
    p = np.exp(s)
    return np.maximum(m, s.max(axis=1)), l + p.sum(axis=1), acc + p @ v


def update_forgets_l(m, l, acc, s, v):
    """Updates m and acc, returns l unchanged (0): O = acc / 0."""
    m_new = np.maximum(m, s.max(axis=1))
    alpha = np.exp(m - m_new)
    p = np.exp(s - m_new[:, None])
    return m_new, l, alpha[:, None] * acc + p @ v


def _update(m, l, acc, s, v):
    m_new = np.maximum(m, s.max(axis=1))
    alpha, p = np.exp(m - m_new), np.exp(s - m_new[:, None])
    return m_new, alpha * l + p.sum(axis=1), alpha[:, None] * acc + p @ v


def loop_q_in_inner_loop(mem, n, d, block_r, block_c):
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
            m, l, acc = _update(m, l, acc, (qi @ kj.T) * scale, vj)
            mem.free(f"K{(j,)}", f"V{(j,)}", f"Q{(i,)}")
        mem.store("O", acc / l[:, None], rows, tile=(i,))


def loop_off_by_one(mem, n, d, block_r, block_c):
    """range(n // block_r) drops the ragged last row block."""
    scale = 1.0 / math.sqrt(d)
    for i in range(n // block_r):
        rows = slice(i * block_r, (i + 1) * block_r)
        qi = mem.load("Q", rows, tile=(i,))
        m, l, acc = np.full(block_r, -np.inf, np.float32), np.zeros(block_r, np.float32), np.zeros((block_r, d),
                                                                                                     np.float32)
        for j, j0 in enumerate(range(0, n, block_c)):
            cols = slice(j0, min(j0 + block_c, n))
            kj, vj = mem.load("K", cols, tile=(j,)), mem.load("V", cols, tile=(j,))
            m, l, acc = _update(m, l, acc, (qi @ kj.T) * scale, vj)
            mem.free(f"K{(j,)}", f"V{(j,)}")
        mem.store("O", acc / l[:, None], rows, tile=(i,))
        mem.free(f"Q{(i,)}")


def loop_no_scale(mem, n, d, block_r, block_c):
    """Forgets the 1/√d of the scores."""
    for i, i0 in enumerate(range(0, n, block_r)):
        rows = slice(i0, min(i0 + block_r, n))
        qi = mem.load("Q", rows, tile=(i,))
        r = qi.shape[0]
        m, l, acc = np.full(r, -np.inf, np.float32), np.zeros(r, np.float32), np.zeros((r, d), np.float32)
        for j, j0 in enumerate(range(0, n, block_c)):
            cols = slice(j0, min(j0 + block_c, n))
            kj, vj = mem.load("K", cols, tile=(j,)), mem.load("V", cols, tile=(j,))
            m, l, acc = _update(m, l, acc, qi @ kj.T, vj)
            mem.free(f"K{(j,)}", f"V{(j,)}")
        mem.store("O", acc / l[:, None], rows, tile=(i,))
        mem.free(f"Q{(i,)}")


CATALOGUE = [
    ("05.1", update_no_rescale, "missing_rescale"),
    ("05.1", update_no_max, "overflow"),
    ("05.1", update_forgets_l, "all_non_finite"),
    ("05.2", loop_q_in_inner_loop, "extra_reads_Q"),
    ("05.2", loop_off_by_one, "rows_not_written"),
    ("05.2", loop_no_scale, "wrong_sm_scale"),
    ("05.3", lambda n, d, bc, b: (2 * n * d + (n // bc) * (3 * n * d + 4 * n)) * b, "floor_not_ceil"),
    ("05.3", lambda n, d, bc, b: (2 * n * d + math.ceil(n / bc) * 3 * n * d) * b, "stats_missing"),
    ("05.3", lambda n, d, bc, b: (2 * n * d * math.ceil(n / bc) + math.ceil(n / bc) * (3 * n * d + 4 * n)) * b,
     "kv_per_pass"),
]
