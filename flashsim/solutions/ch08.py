"""Chapter 08 solutions (reference answers to :mod:`flashsim.course.ch08.checks`), plus plausible wrong answers the
tests make sure the checkers reject."""
from __future__ import annotations

import numpy as np

__all__ = ["causal_tile_kind", "causal_tile_mask", "causal_flops_fraction"]


def causal_tile_kind(i, j, block_r, block_c, n):
    """"skip" when every key column of tile (i, j) is after every query row, "full" when every column is at or
    before every row, else "partial" (query row r sees key column c iff c <= r).

    Introduced in chapter 08.
    """
    first_row, last_row = i * block_r, min((i + 1) * block_r, n) - 1
    first_col, last_col = j * block_c, min((j + 1) * block_c, n) - 1
    if first_col > last_row:
        return "skip"
    if last_col <= first_row:
        return "full"
    return "partial"


def causal_tile_mask(i, j, block_r, block_c, n):
    """Boolean (rows, cols) mask of tile (i, j), True where key column <= query row, in *global* indices.

    Introduced in chapter 08.
    """
    rows = np.arange(i * block_r, min((i + 1) * block_r, n))
    cols = np.arange(j * block_c, min((j + 1) * block_c, n))
    return cols[None, :] <= rows[:, None]


def causal_flops_fraction(n, block_r, block_c):
    """Causal FLOPs / non-causal FLOPs when Br and Bc divide N: row block i computes the K/V blocks j with
    j·Bc ≤ (i+1)·Br − 1, i.e. ⌈(i+1)·Br/Bc⌉ of the Tc blocks (a partial tile costs as much as a full one).

    Introduced in chapter 08.
    """
    tr, tc = n // block_r, n // block_c
    visited = sum(min(tc, -(-(i + 1) * block_r // block_c)) for i in range(tr))
    return visited / (tr * tc)


# --- plausible wrong answers (tests check the checkers reject them) ------------------------------------------
def wrong_causal_tile_kind_off_by_one(i, j, block_r, block_c, n):
    """Off by one: skips a tile whose first column equals the block's last row (one visible element lost)."""
    last_row = min((i + 1) * block_r, n) - 1
    if j * block_c >= last_row:
        return "skip"
    return causal_tile_kind(i, j, block_r, block_c, n)


def wrong_causal_tile_kind_never_skip(i, j, block_r, block_c, n):
    """Correct output, no saving: masks every tile instead of skipping the ones above the diagonal."""
    return "partial"


def wrong_causal_tile_mask_strict(i, j, block_r, block_c, n):
    """Wrong mask: c < r hides the diagonal, so query 0 sees nothing."""
    rows = np.arange(i * block_r, min((i + 1) * block_r, n))
    cols = np.arange(j * block_c, min((j + 1) * block_c, n))
    return cols[None, :] < rows[:, None]


def wrong_causal_tile_mask_local(i, j, block_r, block_c, n):
    """Wrong mask: compares indices inside the tile, forgetting the tile's offsets (i·Br, j·Bc)."""
    r = min((i + 1) * block_r, n) - i * block_r
    c = min((j + 1) * block_c, n) - j * block_c
    return np.arange(c)[None, :] <= np.arange(r)[:, None]


def wrong_causal_flops_fraction_half(n, block_r, block_c):
    """Forgets that the diagonal tiles are computed in full: exactly 1/2."""
    return 0.5


def wrong_causal_flops_fraction_square(n, block_r, block_c):
    """Uses the square-block formula (T+1)/(2T) with T = N/Bc, wrong when Br != Bc."""
    t = n // block_c
    return (t + 1) / (2 * t)
