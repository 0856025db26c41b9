"""Solutions of chapter 03's exercises (Tiling)."""
from __future__ import annotations

import math

from flashsim.model.dtypes import dtype_bytes

__all__ = ["tiled_qkt", "paper_blocks", "tile_fits"]

#: exercise id -> the functions that solve it (what flashsim.exercises.reveal shows)
SOLUTIONS = {"03.1": ("tiled_qkt",), "03.2": ("paper_blocks",), "03.3": ("tile_fits",)}


def tiled_qkt(mem, n, d, block_r, block_c):
    """Exercise 03.1: S = Q Kᵀ tile by tile on a flashsim Memory. Q_i stays in SRAM while the K_j stream past."""
    for i, r0 in enumerate(range(0, n, block_r)):
        rows = slice(r0, min(r0 + block_r, n))
        q = mem.load("Q", rows=rows, tile=(i,))                       # (Br, d), once per row block
        for j, c0 in enumerate(range(0, n, block_c)):
            cols = slice(c0, min(c0 + block_c, n))
            k = mem.load("K", rows=cols, tile=(j,))                   # (Bc, d), once per tile
            mem.scratch("S_ij", q.shape[0] * k.shape[0] * 4)          # fp32 accumulator on chip
            s = q @ k.T                                               # (Br, Bc)
            mem.compute(2 * q.shape[0] * k.shape[0] * d, tensor="S", tile=(i, j), note="S_ij = Q_i K_jᵀ")
            mem.store("S", s, rows=rows, cols=cols, tile=(i, j))
            mem.free(f"K{(j,)}", "S_ij")
        mem.free(f"Q{(i,)}")


def paper_blocks(sram_bytes, d, dtype):
    """Exercise 03.2: FA1 §3.1, M = SRAM size in elements: Bc = ⌈M / 4d⌉, Br = min(Bc, d)."""
    m = sram_bytes // dtype_bytes(dtype)
    bc = math.ceil(m / (4 * d))
    return min(bc, d), bc


def tile_fits(block_r, block_c, d, dtype, sram_bytes):
    """Exercise 03.3: Q_i and K_j in the storage dtype plus the fp32 S_ij accumulator fit in SRAM."""
    b = dtype_bytes(dtype)
    return block_r * d * b + block_c * d * b + block_r * block_c * 4 <= sram_bytes
