"""Count mode: FlashAttention's counters (bytes by tensor, FLOPs, peak SRAM) without numbers (chapters 05, 07, 08).

The same loop structure as step mode (:mod:`.forward`, :mod:`.backward`), summed in closed form over the
outer loop index (flash2's row blocks i, flash1's and the backward's column blocks j) with the exact tile sums of
:mod:`flashsim.model.attention.visibility`: Python integers, no array of size N/B, so any N (10¹² included) is
counted exactly in microseconds. The tests check count mode, step mode, the closed forms and a brute-force loop
agree.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from flashsim.model.attention.flash.blocks import effective_peak, phases, resolve_blocks
from flashsim.model.attention.visibility import tile_sums
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
    # the three sums over the computed tiles (i, j), exact Python integers for any N (visibility.tile_sums)
    tile_rows, tile_cols, tile_rc = tile_sums(n, br, bc, causal)
    if algo == "flash2":
        # outer loop over row blocks i: block i reads Q_i once and K_j, V_j for its visible j (Σ_i C_i = tile_cols)
        c.add_read("Q", n * d * b)
        c.add_read("K", tile_cols * d * b)
        c.add_read("V", tile_cols * d * b)
        c.add_write("O", n * d * b)
        c.add_write("L", n * bs)
        c.flops = 4 * d * tile_rc
        return c, 0
    # flash1: outer loop over K/V blocks j: block j reads K_j, V_j, then every visible row block i ≥ i_first(j)
    # reads Q_i, O_i, l_i, m_i and writes O_i, l_i, m_i (Σ_j rows of Q its visible tiles cover = tile_rows)
    c.add_read("K", n * d * b)
    c.add_read("V", n * d * b)
    for name, per_row in (("Q", d * b), ("O", d * b), ("l", bs), ("m", bs)):
        c.add_read(name, tile_rows * per_row)
    for name, per_row in (("O", d * b), ("l", bs), ("m", bs)):
        c.add_write(name, tile_rows * per_row)
    c.flops = 4 * d * tile_rc
    init = n * d * b + 2 * n * bs  # memset of O, l, m before the loop
    return c, init


def _count_backward(algo, n, d, br, bc, b, bs, causal) -> tuple[Counters, int]:
    c = Counters()
    if algo == "flash2":  # preprocess pass: D_i = rowsum(dO_i ∘ O_i), written once
        c.add_read("O", n * d * b)
        c.add_read("dO", n * d * b)
        c.add_write("D", n * bs)
    # outer loop over K/V blocks j; every visible tile (i, j) re-reads the row block's tensors
    tile_rows, _, tile_rc = tile_sums(n, br, bc, causal)
    c.add_read("K", n * d * b)
    c.add_read("V", n * d * b)
    per_tile = [("Q", d * b), ("dO", d * b), ("dQ", d * b)]
    per_tile += [("O", d * b), ("m", bs), ("l", bs)] if algo == "flash1" else [("L", bs), ("D", bs)]
    for name, per_row in per_tile:
        c.add_read(name, tile_rows * per_row)
    c.add_write("dQ", tile_rows * d * b)
    c.add_write("dK", n * d * b)
    c.add_write("dV", n * d * b)
    c.flops = 10 * d * tile_rc
    return c, n * d * b  # dQ zeroed before the loop


def count_flash(problem) -> FlashCount:
    """Count mode: the counters of flash1/flash2 (forward, + backward if asked) without any numbers.

    No loop over tiles or blocks: exact and O(log N) for any N.
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
    h = problem.batch_heads
    fwd_h = fwd * h
    bwd_h = bwd * h if bwd is not None else None
    total = fwd_h + bwd_h if bwd_h is not None else fwd_h * 1
    return FlashCount(problem, br, bc, total, fwd_h, bwd_h, init * h, tiles)
