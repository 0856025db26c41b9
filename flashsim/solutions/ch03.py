"""Solutions of chapter 03's exercises (Tiling). 03.1 and 03.2 are the chapter's own tiled loop and block rule
(:mod:`flashsim.course.ch03.tiling`, which the dashboards replay); 03.2 inverts the rule, 03.3 is written here."""
from __future__ import annotations

from flashsim.course.ch03.tiling import fa1_blocks as paper_blocks  # exercise 03.2: the course's own rule
from flashsim.course.ch03.tiling import tiled_qkt_loop as tiled_qkt  # exercise 03.1: the loop the stepper replays
from flashsim.model.dtypes import dtype_bytes

__all__ = ["tiled_qkt", "paper_blocks", "sram_for_block", "tile_fits"]

#: exercise id -> the functions that solve it (what flashsim.exercises.reveal shows)
SOLUTIONS = {"03.1": ("tiled_qkt",), "03.2": ("sram_for_block",), "03.3": ("tile_fits",)}


def sram_for_block(block_c, d, dtype):
    """Exercise 03.2: ⌈M / 4d⌉ ≥ Bc exactly when M > 4d·(Bc − 1), so the smallest M is 4d·(Bc − 1) + 1
    elements; the SRAM holds M = sram_bytes // b elements, so it needs M·b bytes."""
    return (4 * d * (block_c - 1) + 1) * dtype_bytes(dtype)


def tile_fits(block_r, block_c, d, dtype, sram_bytes):
    """Exercise 03.3: Q_i and K_j in the storage dtype plus the fp32 S_ij accumulator fit in SRAM."""
    b = dtype_bytes(dtype)
    return block_r * d * b + block_c * d * b + block_r * block_c * 4 <= sram_bytes
