"""Chapter 08 solutions (reference answers to :mod:`flashsim.course.ch08.checks`)."""
from __future__ import annotations

import numpy as np

__all__ = ["causal_tile_kind", "window_tile_kind", "causal_tile_mask", "causal_flops_fraction"]

#: exercise id -> the functions that solve it (what flashsim.exercises.reveal shows)
SOLUTIONS = {"08.1": ("window_tile_kind",), "08.2": ("causal_tile_mask",), "08.3": ("causal_flops_fraction",)}


def window_tile_kind(i, j, block_r, block_c, n, window):
    """Exercise 08.1, causal with a sliding window (query r sees key c iff r − window < c <= r). The right edge
    is the causal one; at the left edge the *first* query row reaches furthest left (it decides skip) and the
    *last* row least far (it decides full):

    * skip when the first column is after the last row, or the last column is left of the first row's window;
    * full when the last column is at or before the first row and the first column is inside the last row's
      window;
    * partial otherwise.

    Introduced in chapter 08.
    """
    first_row, last_row = i * block_r, min((i + 1) * block_r, n) - 1
    first_col, last_col = j * block_c, min((j + 1) * block_c, n) - 1
    if first_col > last_row or last_col <= first_row - window:
        return "skip"
    if last_col <= first_row and first_col > last_row - window:
        return "full"
    return "partial"


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
