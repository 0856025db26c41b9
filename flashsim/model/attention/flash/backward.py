"""Step-mode backward by recomputation (FA1 Algorithm 4 / FA2): outer loop over K/V blocks j, inner over Q blocks i.

dK_j, dV_j accumulate on chip; dQ_i is read, updated and written back per tile. S and P are recomputed from Q, K
and the saved statistics: FA1 from (m, l) with D_i = rowsum(dO_i ∘ O_i) recomputed per tile, FA2 from the
logsumexp L with D written once by a preprocess pass. Visible tiles come from
:mod:`flashsim.model.attention.visibility`.
"""
from __future__ import annotations

import numpy as np

from flashsim.model.attention.flash.stepper import ACC_BYTES, TileStepper
from flashsim.model.attention.visibility import first_visible_row_block, n_blocks


def flash_backward(st: TileStepper, algo: str) -> None:
    """Backward of one head: dQ, dK, dV into st.mem (dO already there)."""
    mem, n, d, tau = st.mem, st.n, st.d, st.tau
    mem.empty("dQ", (n, d), fill=0.0)  # zeroed before the loop: init_write_bytes
    mem.empty("dK", (n, d))
    mem.empty("dV", (n, d))
    if algo == "flash2":  # preprocess: D = rowsum(dO ∘ O), one pass, written once
        mem.empty("D", (n,), dtype=st.sd)
        for i in range(n_blocks(n, st.br)):
            r0, r = st.rows(i)
            rs = slice(r0, r0 + r)
            o_i = mem.load("O", rows=rs, tile=(i,))  # (r, d)
            do_i = mem.load("dO", rows=rs, tile=(i,))  # (r, d)
            mem.scratch(f"D_acc{(i,)}", r * ACC_BYTES)
            mem.compute(0, tensor="D", tile=(i,), note="D_i = rowsum(dO_i ∘ O_i)")
            mem.store("D", (do_i * o_i).sum(axis=1), rows=rs, tile=(i,))
            mem.free(f"O{(i,)}", f"dO{(i,)}", f"D_acc{(i,)}")
    for j in range(n_blocks(n, st.bc)):
        c0, c = st.cols(j)
        cs = slice(c0, c0 + c)
        k_j = mem.load("K", rows=cs, tile=(j,))  # (c, d)
        v_j = mem.load("V", rows=cs, tile=(j,))  # (c, d)
        mem.scratch(f"dK_acc{(j,)}", c * d * ACC_BYTES)
        mem.scratch(f"dV_acc{(j,)}", c * d * ACC_BYTES)
        dk = np.zeros((c, d), np.float32)
        dv = np.zeros((c, d), np.float32)
        for i in range(first_visible_row_block(j, st.br, st.bc, st.causal), n_blocks(n, st.br)):
            r0, r = st.rows(i)
            rs = slice(r0, r0 + r)
            q_i = mem.load("Q", rows=rs, tile=(i,))  # (r, d)
            if algo == "flash1":
                o_i = mem.load("O", rows=rs, tile=(i,))  # (r, d)
            do_i = mem.load("dO", rows=rs, tile=(i,))  # (r, d)
            dq_i = mem.load("dQ", rows=rs, tile=(i,))  # (r, d)
            if algo == "flash1":
                m_i = mem.load("m", rows=rs, tile=(i,))  # (r,)
                l_i = mem.load("l", rows=rs, tile=(i,))  # (r,)
                mem.scratch(f"D_acc{(i,)}", r * ACC_BYTES)
                d_i = (do_i * o_i).sum(axis=1)  # (r,) recomputed on chip
            else:
                lse_i = mem.load("L", rows=rs, tile=(i,))  # (r,)
                d_i = mem.load("D", rows=rs, tile=(i,))  # (r,)
            mem.scratch(f"S{(i, j)}", r * c * ACC_BYTES)
            mem.scratch(f"dP{(i, j)}", r * c * ACC_BYTES)
            s = st.scores(q_i, k_j, r0, r, c0, c)  # (r, c) recomputed
            if algo == "flash1":
                p = np.exp(s - m_i[:, None]) / l_i[:, None]  # (r, c) P_ij = diag(l)⁻¹ e^(S − m)
            else:
                p = np.exp(s - lse_i[:, None])  # (r, c) P_ij = e^(S − L)
            dv += p.T @ do_i  # (c, d)
            dp = do_i @ v_j.T  # (r, c)
            ds = p * (dp - d_i[:, None])  # (r, c) dS = P ∘ (dP − D)
            dq_i = dq_i + tau * (ds @ k_j)  # (r, d)
            dk += tau * (ds.T @ q_i)  # (c, d)
            mem.compute(10 * r * c * d, tensor="dS", tile=(i, j), note="S, P recomputed; dV, dP, dS, dQ, dK")
            mem.store("dQ", dq_i, rows=rs, tile=(i,), note="dQ_i += τ dS K_j")
            mem.free(*(f"{t}{(i,)}" for t in ("Q", "O", "dO", "dQ", "m", "l", "L", "D", "D_acc")), f"S{(i, j)}",
                     f"dP{(i, j)}")
        mem.store("dK", dk, rows=cs, tile=(j,))
        mem.store("dV", dv, rows=cs, tile=(j,))
        mem.free(f"K{(j,)}", f"V{(j,)}", f"dK_acc{(j,)}", f"dV_acc{(j,)}")
