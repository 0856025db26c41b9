"""Count mode: FlashAttention's counters (bytes by tensor, FLOPs, peak SRAM) without numbers (chapters 05, 07, 08).

The same loop structure as step mode (:mod:`.forward`, :mod:`.backward`), vectorized over the outer loop index:
flash2's row blocks i, flash1's and the backward's column blocks j. The visible tiles of each come from
:mod:`flashsim.model.attention.visibility`; the tests check count mode, step mode and the closed forms agree.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from flashsim.model.attention.flash.blocks import effective_peak, phases, resolve_blocks
from flashsim.model.attention.visibility import block_sizes, first_visible_row_block, n_blocks, visible_key_rows
from flashsim.model.memory import Counters


@dataclass
class FlashCount:
    """Count-mode result. Counters cover all heads (bytes and FLOPs × heads; peak SRAM is per thread block)."""

    problem: object
    block_r: int
    block_c: int
    counters: Counters  # forward (+ backward), all heads
    forward: Counters
    backward: Counters | None
    init_write_bytes: int  # memsets outside the loops (flash1's O, l, m; dQ before a backward), all heads
    sram_tiles: dict = field(default_factory=dict)  # the tile set of the largest phase, name → bytes

    @property
    def hbm_read_bytes(self) -> int:
        return self.counters.hbm_read_bytes

    @property
    def hbm_write_bytes(self) -> int:
        return self.counters.hbm_write_bytes

    @property
    def flops(self) -> int:
        return self.counters.flops

    @property
    def sram_peak_bytes(self) -> int:
        return self.counters.sram_peak_bytes


def _count_forward(algo, n, d, br, bc, b, bs, causal) -> tuple[Counters, int]:
    c = Counters()
    if algo == "flash2":
        # outer loop over row blocks i, vectorized: block i reads Q_i once and K_j, V_j for its visible j
        tr = n_blocks(n, br)
        i = np.arange(tr, dtype=np.int64)
        rows = block_sizes(n, br)  # (Tr,)
        cols = visible_key_rows(i, br, bc, n, causal)  # (Tr,) key rows block i sees (its visible blocks)
        c.add_read("Q", int(rows.sum()) * d * b)
        c.add_read("K", int(cols.sum()) * d * b)
        c.add_read("V", int(cols.sum()) * d * b)
        c.add_write("O", int(rows.sum()) * d * b)
        c.add_write("L", int(rows.sum()) * bs)
        c.flops = int(4 * d * int((rows * cols).sum()))
        return c, 0
    # flash1: outer loop over K/V blocks j, vectorized: block j reads K_j, V_j, then every visible row block
    # i ≥ i_first(j) reads Q_i, O_i, l_i, m_i and writes O_i, l_i, m_i
    tc = n_blocks(n, bc)
    j = np.arange(tc, dtype=np.int64)
    cols = block_sizes(n, bc)  # (Tc,)
    first = first_visible_row_block(j, br, bc, causal)  # (Tc,) first row block that sees block j
    vis_rows = n - first * br  # rows of Q the visible tiles of column block j cover
    rows_total = int(vis_rows.sum())
    c.add_read("K", int(cols.sum()) * d * b)
    c.add_read("V", int(cols.sum()) * d * b)
    for name, per_row in (("Q", d * b), ("O", d * b), ("l", bs), ("m", bs)):
        c.add_read(name, rows_total * per_row)
    for name, per_row in (("O", d * b), ("l", bs), ("m", bs)):
        c.add_write(name, rows_total * per_row)
    c.flops = int(4 * d * int((cols * vis_rows).sum()))
    init = n * d * b + 2 * n * bs  # memset of O, l, m before the loop
    return c, init


def _count_backward(algo, n, d, br, bc, b, bs, causal) -> tuple[Counters, int]:
    c = Counters()
    if algo == "flash2":  # preprocess pass: D_i = rowsum(dO_i ∘ O_i), written once
        c.add_read("O", n * d * b)
        c.add_read("dO", n * d * b)
        c.add_write("D", n * bs)
    tc = n_blocks(n, bc)
    j = np.arange(tc, dtype=np.int64)
    cols = block_sizes(n, bc)
    first = first_visible_row_block(j, br, bc, causal)  # (Tc,) first row block that sees block j
    vis_rows = n - first * br
    rows_total = int(vis_rows.sum())
    c.add_read("K", int(cols.sum()) * d * b)
    c.add_read("V", int(cols.sum()) * d * b)
    per_tile = [("Q", d * b), ("dO", d * b), ("dQ", d * b)]
    per_tile += [("O", d * b), ("m", bs), ("l", bs)] if algo == "flash1" else [("L", bs), ("D", bs)]
    for name, per_row in per_tile:
        c.add_read(name, rows_total * per_row)
    c.add_write("dQ", rows_total * d * b)
    c.add_write("dK", int(cols.sum()) * d * b)
    c.add_write("dV", int(cols.sum()) * d * b)
    c.flops = int(10 * d * int((cols * vis_rows).sum()))
    return c, n * d * b  # dQ zeroed before the loop


def count_flash(problem) -> FlashCount:
    """Count mode: the counters of flash1/flash2 (forward, + backward if asked) without any numbers.

    Vectorized over the outer loop index (no Python loop over tiles): flash2 N=65536, d=128, Br=Bc=64 takes well
    under a millisecond.
    """
    br, bc = resolve_blocks(problem)
    n, d, b, bs = problem.n, problem.d, problem.elem_bytes, problem.stats_bytes
    _, tiles = effective_peak(problem, br, bc)
    fwd, init = _count_forward(problem.algo, n, d, br, bc, b, bs, problem.causal)
    fwd.sram_peak_bytes = effective_peak(problem, br, bc, ["forward"])[0]
    bwd = None
    if problem.backward:
        bwd, init_b = _count_backward(problem.algo, n, d, br, bc, b, bs, problem.causal)
        bwd.sram_peak_bytes = effective_peak(problem, br, bc, phases(problem.algo, True)[1:])[0]
        init += init_b
    h = problem.heads
    fwd_h = fwd * h
    bwd_h = bwd * h if bwd is not None else None
    total = fwd_h + bwd_h if bwd_h is not None else fwd_h * 1
    return FlashCount(problem, br, bc, total, fwd_h, bwd_h, init * h, tiles)
