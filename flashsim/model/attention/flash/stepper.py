"""Step mode's per-head context: one head's Memory, the problem's blocks and the tile geometry (chapters 05, 07, 08).

:mod:`.forward` and :mod:`.backward` run the papers' tile loops on a :class:`TileStepper`; :mod:`.step` makes one
per head. Arithmetic is fp32 on (r, c) tiles; storage dtypes are emulated by :class:`~flashsim.model.memory.Memory`.
"""
from __future__ import annotations

import numpy as np

from flashsim.model.attention.flash.blocks import ACC_BYTES
from flashsim.model.attention.reference import softmax_scale
from flashsim.model.attention.visibility import causal_mask
from flashsim.model.memory import Memory

__all__ = ["ACC_BYTES", "TileStepper"]


class TileStepper:
    """Runs one head through a Memory. Tile loops written as in the papers; arithmetic fp32 on (r, c) tiles.

    SRAM copies carry Memory's default names, "<tensor><tile>" (e.g. "K(2,)"), so a free event names the load it
    ends; on-chip intermediates are "S(i, j)", "dP(i, j)", "O_acc(i,)", "m_acc(i,)", "l_acc(i,)", "D_acc(i,)",
    "dK_acc(j,)", "dV_acc(j,)".
    """

    def __init__(self, mem: Memory, problem, br: int, bc: int, keep_o: bool):
        self.mem, self.p, self.br, self.bc = mem, problem, br, bc
        self.n, self.d = problem.n, problem.d
        self.tau = np.float32(softmax_scale(problem.d))
        self.causal = problem.causal
        self.sd = problem.stats_dtype
        self.keep_o = keep_o

    def rows(self, i):
        r0 = i * self.br
        return r0, min(r0 + self.br, self.n) - r0

    def cols(self, j):
        c0 = j * self.bc
        return c0, min(c0 + self.bc, self.n) - c0

    def scores(self, q_i, k_j, r0, r, c0, c):
        """S_ij = τ·Q_i K_jᵀ, masked to −inf right of the diagonal under causal. (r, c) fp32."""
        s = (q_i @ k_j.T) * self.tau  # (r, c)
        if self.causal:
            mask = causal_mask(r0, r, c0, c)
            if mask is not None:
                s = np.where(mask, np.float32(-np.inf), s)
        return s

    def _stats(self, m, l, o):
        st = {"m": m.copy(), "l": l.copy()}
        if self.keep_o:
            st["O"] = o.copy()
        return st
