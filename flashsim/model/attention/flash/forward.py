"""Step-mode forward: FA2's loop order (outer over Q row blocks) and FA1's Algorithm 1 (outer over K/V blocks).

FA2 keeps Q_i, the O accumulator and the running m, l on chip for the whole row block and calls the one
online-softmax tile update (:func:`flashsim.model.attention.online_softmax.online_softmax_update`); O_i and the
logsumexp L_i = m_i + log l_i are written once. FA1 re-reads Q_i, O_i, l_i, m_i from HBM for every visible tile
and writes O_i, l_i, m_i back in normalised form, with m rounded *up* to the statistics dtype (:func:`round_up`).
Visible tiles come from :mod:`flashsim.model.attention.visibility`.
"""
from __future__ import annotations

import numpy as np

from flashsim.model.attention.flash.stepper import ACC_BYTES, TileStepper
from flashsim.model.attention.online_softmax import online_softmax_update
from flashsim.model.attention.visibility import first_visible_row_block, n_blocks, visible_col_blocks
from flashsim.model.dtypes import canonical_dtype, round_to


def round_up(x: np.ndarray, dtype: str) -> np.ndarray:
    """Round to `dtype` toward +inf. A stored max m that is ≥ the true max keeps e^(S − m) ≤ 1."""
    dtype = canonical_dtype(dtype)
    x = np.asarray(x, np.float32)
    r = round_to(x, dtype)
    low = r < x
    if not low.any() or dtype == "fp32":
        return r
    if dtype == "fp16":
        up = np.nextafter(r.astype(np.float16), np.float16(np.inf)).astype(np.float32)
    else:  # bf16: step the top 16 bits by one unit toward +inf
        bits = r.view(np.uint32).astype(np.int64)
        neg = (bits >> 31) & 1
        step = np.where(neg == 1, -0x10000, 0x10000)
        bits = np.where((neg == 1) & ((bits & 0x7FFFFFFF) == 0), 0, bits)  # -0.0 → +0.0 first
        up = (bits + np.where((bits & 0x7FFFFFFF) == 0, 0x10000, step)).astype(np.uint32).view(np.float32)
    return np.where(low, up, r).astype(np.float32)


def flash2_forward(st: TileStepper) -> None:
    """FA2 forward of one head: O and L into st.mem."""
    mem, n, d = st.mem, st.n, st.d
    mem.empty("O", (n, d))
    mem.empty("L", (n,), dtype=st.sd)
    for i in range(n_blocks(n, st.br)):
        r0, r = st.rows(i)
        rs = slice(r0, r0 + r)
        q_i = mem.load("Q", rows=rs, tile=(i,), note=f"Q block {i}")  # (r, d)
        mem.scratch(f"m_acc{(i,)}", r * ACC_BYTES)
        mem.scratch(f"l_acc{(i,)}", r * ACC_BYTES)
        mem.scratch(f"O_acc{(i,)}", r * d * ACC_BYTES)
        m = np.full(r, -np.inf, np.float32)  # (r,) running max
        l = np.zeros(r, np.float32)  # (r,) running denominator, relative to m
        acc = np.zeros((r, d), np.float32)  # (r, d) unnormalised O
        for j in range(visible_col_blocks(i, st.br, st.bc, n, st.causal)):
            c0, c = st.cols(j)
            cs = slice(c0, c0 + c)
            k_j = mem.load("K", rows=cs, tile=(j,), note=f"K block {j}")  # (c, d)
            v_j = mem.load("V", rows=cs, tile=(j,), note=f"V block {j}")  # (c, d)
            mem.scratch(f"S{(i, j)}", r * c * ACC_BYTES)
            s = st.scores(q_i, k_j, r0, r, c0, c)  # (r, c)
            m, l, acc = online_softmax_update(m, l, acc, s, v_j)  # (r,), (r,), (r, d): rescale, add P̃·V_j
            mem.compute(4 * r * c * d, tensor="S", tile=(i, j), note="S=τQKᵀ, online softmax, O+=PV",
                        stats=st._stats(m, l, acc / l[:, None]))
            mem.free(f"S{(i, j)}", f"K{(j,)}", f"V{(j,)}")
        mem.store("O", acc / l[:, None], rows=rs, tile=(i,), note="O_i = acc / l, written once")
        mem.store("L", m + np.log(l), rows=rs, tile=(i,), note="logsumexp L_i = m + log l")
        mem.free(f"Q{(i,)}", f"m_acc{(i,)}", f"l_acc{(i,)}", f"O_acc{(i,)}")


def flash1_forward(st: TileStepper) -> None:
    """FA1 forward of one head (Algorithm 1): O, l, m into st.mem."""
    mem, n, d = st.mem, st.n, st.d
    # line 2: O = 0, l = 0, m = −inf in HBM; a memset outside the loop (init_write_bytes, not counted here)
    mem.empty("O", (n, d), fill=0.0)
    mem.empty("l", (n,), dtype=st.sd, fill=0.0)
    mem.empty("m", (n,), dtype=st.sd, fill=-np.inf)
    for j in range(n_blocks(n, st.bc)):
        c0, c = st.cols(j)
        cs = slice(c0, c0 + c)
        k_j = mem.load("K", rows=cs, tile=(j,), note=f"K block {j}")  # (c, d)
        v_j = mem.load("V", rows=cs, tile=(j,), note=f"V block {j}")  # (c, d)
        for i in range(first_visible_row_block(j, st.br, st.bc, st.causal), n_blocks(n, st.br)):
            r0, r = st.rows(i)
            rs = slice(r0, r0 + r)
            q_i = mem.load("Q", rows=rs, tile=(i,))  # (r, d)
            o_i = mem.load("O", rows=rs, tile=(i,))  # (r, d) normalised so far
            l_i = mem.load("l", rows=rs, tile=(i,))  # (r,)
            m_i = mem.load("m", rows=rs, tile=(i,))  # (r,)
            mem.scratch(f"S{(i, j)}", r * c * ACC_BYTES)
            mem.scratch(f"O_acc{(i,)}", r * d * ACC_BYTES)
            s = st.scores(q_i, k_j, r0, r, c0, c)  # (r, c)
            m_t = s.max(axis=1)  # (r,) m̃_ij; −inf for a row the diagonal masks entirely
            m_t_safe = np.where(np.isneginf(m_t), np.float32(0), m_t)
            p_t = np.exp(s - m_t_safe[:, None])  # (r, c) P̃_ij
            l_t = p_t.sum(axis=1)  # (r,) l̃_ij
            # m_new rounded *up* to the stats dtype: what HBM will hold, used consistently from here on
            m_new = round_up(np.maximum(m_i, m_t), st.sd)  # (r,)
            a = np.exp(m_i - m_new)  # (r,) e^(m_i − m_new), 0 on the first visit (m_i = −inf)
            bt = np.exp(m_t - m_new)  # (r,) e^(m̃ − m_new)
            l_new = a * l_i + bt * l_t
            o_new = ((l_i * a)[:, None] * o_i + bt[:, None] * (p_t @ v_j)) / l_new[:, None]  # (r, d)
            mem.compute(4 * r * c * d, tensor="S", tile=(i, j), note="S=τQKᵀ, P̃, rescale O_i",
                        stats=st._stats(m_new, l_new, o_new))
            mem.store("O", o_new, rows=rs, tile=(i,))
            mem.store("l", l_new, rows=rs, tile=(i,))
            mem.store("m", m_new, rows=rs, tile=(i,))
            mem.free(*(f"{t}{(i,)}" for t in ("Q", "O", "l", "m", "O_acc")), f"S{(i, j)}")
        mem.free(f"K{(j,)}", f"V{(j,)}")
