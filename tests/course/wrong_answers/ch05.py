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
    ("05.2", loop_q_in_inner_loop, "q_reloaded"),
    ("05.2", loop_off_by_one, "rows_not_written"),
    ("05.2", loop_no_scale, "wrong_sm_scale"),
    ("05.3", lambda n, d, bc, b, s: (2 * n * d + (n // bc) * 3 * n * d) * b + (n // bc) * 4 * n * s,
     "floor_not_ceil"),
    ("05.3", lambda n, d, bc, b, s: (2 * n * d + math.ceil(n / bc) * 3 * n * d) * b, "stats_missing"),
    ("05.3", lambda n, d, bc, b, s: (2 * n * d * math.ceil(n / bc) + math.ceil(n / bc) * 3 * n * d) * b
     + math.ceil(n / bc) * 4 * n * s, "kv_per_pass"),
]


def _loop(mem, n, d, block_r, block_c, *, store_each_tile=False, load_kv_twice=False, keep_tiles=False,
          k_from_hbm=False, fa1_order=False, update=_update):
    """The FA2 loop with one learner's mistake switched on."""
    scale = 1.0 / math.sqrt(d)
    if fa1_order:      # FA1's order: outer over K/V, O (unnormalised) and the statistics kept in host arrays
        m_all, l_all = np.full(n, -np.inf, np.float32), np.zeros(n, np.float32)
        acc_all = np.zeros((n, d), np.float32)
        for j, j0 in enumerate(range(0, n, block_c)):
            cols = slice(j0, min(j0 + block_c, n))
            kj, vj = mem.load("K", cols, tile=(j,)), mem.load("V", cols, tile=(j,))
            for i, i0 in enumerate(range(0, n, block_r)):
                rows = slice(i0, min(i0 + block_r, n))
                qi = mem.load("Q", rows, tile=(i,))
                m_all[rows], l_all[rows], acc_all[rows] = update(m_all[rows], l_all[rows], acc_all[rows],
                                                                 (qi @ kj.T) * scale, vj)
                mem.store("O", acc_all[rows] / l_all[rows, None], rows, tile=(i,))
                mem.free(f"Q{(i,)}")
            mem.free(f"K{(j,)}", f"V{(j,)}")
        return
    for i, i0 in enumerate(range(0, n, block_r)):
        rows = slice(i0, min(i0 + block_r, n))
        qi = mem.load("Q", rows, tile=(i,))
        r = qi.shape[0]
        m, l, acc = np.full(r, -np.inf, np.float32), np.zeros(r, np.float32), np.zeros((r, d), np.float32)
        for j, j0 in enumerate(range(0, n, block_c)):
            cols = slice(j0, min(j0 + block_c, n))
            kj = mem.hbm("K")[cols] if k_from_hbm else mem.load("K", cols, tile=(j,))
            vj = mem.load("V", cols, tile=(j,))
            s = (qi @ kj.T) * scale
            if load_kv_twice:     # S from one copy of K, then K and V loaded again "for P V"
                mem.free(f"K{(j,)}", f"V{(j,)}")
                mem.load("K", cols, tile=(j,))
                vj = mem.load("V", cols, tile=(j,))
            m, l, acc = update(m, l, acc, s, vj)
            if store_each_tile:
                mem.store("O", acc / l[:, None], rows, tile=(i,))
            if not keep_tiles:
                mem.free(f"K{(j,)}", f"V{(j,)}")
        if not store_each_tile:
            mem.store("O", acc / l[:, None], rows, tile=(i,))
        mem.free(f"Q{(i,)}")


def loop_stores_o_every_tile(mem, n, d, block_r, block_c):
    """Issue 26: storing O after every tile was told to look for extra loads."""
    _loop(mem, n, d, block_r, block_c, store_each_tile=True)


def loop_loads_kv_twice(mem, n, d, block_r, block_c):
    _loop(mem, n, d, block_r, block_c, load_kv_twice=True)


def loop_never_frees_kv(mem, n, d, block_r, block_c):
    _loop(mem, n, d, block_r, block_c, keep_tiles=True)


def loop_reads_k_without_load(mem, n, d, block_r, block_c):
    _loop(mem, n, d, block_r, block_c, k_from_hbm=True)


def loop_fa1_order(mem, n, d, block_r, block_c):
    _loop(mem, n, d, block_r, block_c, fa1_order=True)


def loop_stub_does_nothing(mem, n, d, block_r, block_c):
    """The old stub's shape: returns without doing anything."""
    return 0


def update_inverted(m, l, acc, s, v):
    m_new = np.maximum(m, s.max(axis=1))
    inv = np.exp(m_new - m)
    p = np.exp(s - m_new[:, None])
    return m_new, inv * l + p.sum(axis=1), inv[:, None] * acc + p @ v


def update_block_max(m, l, acc, s, v):
    """Issue 26: the block sum taken against the block max, without the correction."""
    m_new, mb = np.maximum(m, s.max(axis=1)), s.max(axis=1)
    alpha, p = np.exp(m - m_new), np.exp(s - mb[:, None])
    return m_new, alpha * l + p.sum(axis=1), alpha[:, None] * acc + p @ v


def update_fa1_normalised(m, l, acc, s, v):
    """Issue 26: FA1-style, keeps acc normalised inside the loop."""
    m_new = np.maximum(m, s.max(axis=1))
    alpha, p = np.exp(m - m_new), np.exp(s - m_new[:, None])
    l_new = alpha * l + p.sum(axis=1)
    return m_new, l_new, ((alpha * l)[:, None] * acc + p @ v) / l_new[:, None]


def update_forgets_tile_factor_on_acc(m, l, acc, s, v):
    """Issue 26: the e^(m̃ − m) factor forgotten (on the accumulator's new term)."""
    mt = s.max(axis=1)
    m_new = np.maximum(m, mt)
    alpha, pt = np.exp(m - m_new), np.exp(s - mt[:, None])
    return m_new, alpha * l + np.exp(mt - m_new) * pt.sum(axis=1), alpha[:, None] * acc + pt @ v


def update_acc_not_rescaled(m, l, acc, s, v):
    m_new = np.maximum(m, s.max(axis=1))
    alpha, p = np.exp(m - m_new), np.exp(s - m_new[:, None])
    return m_new, alpha * l + p.sum(axis=1), acc + p @ v


CATALOGUE += [
    ("05.1", update_inverted, "inverted_rescale"),
    ("05.1", update_block_max, "block_max_uncorrected"),
    ("05.1", update_fa1_normalised, "normalised_inside"),
    ("05.1", update_forgets_tile_factor_on_acc, "acc_factor_forgotten"),
    ("05.1", update_acc_not_rescaled, "acc_not_rescaled"),
    ("05.2", loop_stores_o_every_tile, "extra_stores_O"),
    ("05.2", loop_loads_kv_twice, "kv_reloaded"),
    ("05.2", loop_never_frees_kv, "tile_not_freed"),
    ("05.2", loop_reads_k_without_load, "reads_not_counted"),
    ("05.2", loop_fa1_order, "fa1_loop_order"),
    ("05.2", loop_stub_does_nothing, "nothing_moved"),
    ("05.3", lambda n, d, bc, b, s: (2 * n * d + math.ceil(n / bc) * (3 * n * d + 4 * n)) * b, "stats_in_elem_bytes"),
    ("05.3", lambda n, d, bc, b, s: (2 * n * d + math.ceil(n / bc) * 3 * n * d) * b + math.ceil(n / bc) * 2 * n * s,
     "stats_moved_once"),
    ("05.3", lambda n, d, bc, b, s: (2 * n * d + math.ceil(n / bc) * 2 * n * d) * b + math.ceil(n / bc) * 4 * n * s,
     "o_not_read"),
]
