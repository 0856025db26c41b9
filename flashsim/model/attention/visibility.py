"""Tiling and causal visibility: the block-size vocabulary and the one rule for which tiles a causal mask skips.

**Block sizes, one vocabulary.** Attention is tiled into row blocks of the queries and column blocks of the keys
and values. The same two numbers have four spellings, one per layer; they always mean the same thing:

=========================  ===================  ====================================================
where                      rows of Q per block  rows of K/V per block (columns of S)
=========================  ===================  ====================================================
FlashAttention papers      Br                   Bc
simulator (``flashsim``)   ``block_r``          ``block_c``
Triton kernels (constexpr) ``BLOCK_M``          ``BLOCK_N``
kernel arguments, CLI      ``block_m``          ``block_n``
=========================  ===================  ====================================================

A length-N axis tiled by B has T = ⌈N/B⌉ blocks (:func:`n_blocks`; Tr for rows, Tc for columns); block t
covers rows t·B … min((t+1)·B, N) − 1, so the last block is *ragged*: it holds N − (T−1)·B rows
(:func:`block_sizes`, :func:`block_extent`). Loads and stores count only real rows.

**Causal visibility.** Query row r sees key column c iff c ≤ r (:func:`causal_mask`, element-wise; top-left
aligned). Tile (i, j) (row block i, column block j) is *skipped*, no loads and no FLOPs, when every column of it
lies right of every row of it::

    skipped  ⇔  j·Bc > min((i+1)·Br, N) − 1            (docs/design.md)

so row block i computes the leftmost :func:`visible_col_blocks` column blocks, and column block j is seen by row
blocks :func:`first_visible_row_block` … Tr − 1. A tile the diagonal crosses is computed and masked element-wise.
Every user (step mode, count mode, the closed forms, the L2 traces, the kernel view) calls these functions;
:func:`tile_sums` adds up the three per-tile quantities byte counts are made of.

>>> n_blocks(100, 32), block_sizes(100, 32).tolist()
(4, [32, 32, 32, 4])
>>> [int(visible_col_blocks(i, 32, 16, 100)) for i in range(4)]
[2, 4, 6, 7]
>>> tile_visible(0, 2, 32, 16, 100), tile_visible(0, 1, 32, 16, 100)
(False, True)
"""
from __future__ import annotations

import numpy as np

__all__ = ["block_extent", "block_sizes", "causal_mask", "first_visible_row_block", "floor_sum", "n_blocks", "tile_sums", "visible_tiles",
           "tile_visible", "visible_col_blocks", "visible_key_rows"]


def n_blocks(n: int, block: int) -> int:
    """T = ⌈n/block⌉: blocks of a length-n axis."""
    return -(-int(n) // int(block))


def block_sizes(n: int, block: int) -> np.ndarray:
    """(T,) int64 rows of each block: block, …, block, n − (T−1)·block (the ragged last block)."""
    t = n_blocks(n, block)
    return np.minimum(block, n - block * np.arange(t, dtype=np.int64))


def block_extent(t: int, block: int, n: int) -> int:
    """Rows of block t of a length-n axis (0 for a block past the end)."""
    return max(0, min(block, n - t * block))


def tile_visible(i, j, block_r: int, block_c: int, n: int, causal: bool = True):
    """Whether tile (i, j) is computed: always without a mask; under causal iff j·Bc ≤ min((i+1)·Br, N) − 1.

    i, j: ints or integer arrays (broadcast). Returns a bool or a bool array.
    """
    if not causal:
        return np.ones(np.broadcast(i, j).shape, bool) if np.ndim(i) or np.ndim(j) else True
    vis = np.asarray(j) * block_c <= np.minimum((np.asarray(i) + 1) * block_r, n) - 1
    return vis if vis.ndim else bool(vis)


def visible_col_blocks(i, block_r: int, block_c: int, n: int, causal: bool = True):
    """J_i: column blocks row block i computes, namely j = 0 … J_i − 1 (all Tc without a mask). int or array."""
    tc = n_blocks(n, block_c)
    if not causal:
        return np.full(np.shape(i), tc, np.int64) if np.ndim(i) else tc
    last_row = np.minimum((np.asarray(i, dtype=np.int64) + 1) * block_r, n) - 1  # R_i
    j_vis = np.minimum(last_row // block_c + 1, tc)
    return j_vis if j_vis.ndim else int(j_vis)


def visible_key_rows(i, block_r: int, block_c: int, n: int, causal: bool = True):
    """C_i = min(J_i·Bc, N): key (K/V) rows the visible column blocks of row block i cover. int or array."""
    c = np.minimum(np.asarray(visible_col_blocks(i, block_r, block_c, n, causal)) * block_c, n)
    return c if c.ndim else int(c)


def first_visible_row_block(j, block_r: int, block_c: int, causal: bool = True):
    """First row block that sees column block j: ⌊j·Bc/Br⌋ under causal (rows i·Br+Br−1 ≥ j·Bc), else 0."""
    if not causal:
        return np.zeros(np.shape(j), np.int64) if np.ndim(j) else 0
    first = (np.asarray(j, dtype=np.int64) * block_c) // block_r
    return first if first.ndim else int(first)


def causal_mask(r0: int, r: int, c0: int, c: int, *, always: bool = False) -> np.ndarray | None:
    """(r, c) bool, True where key column c0 + y is right of query row r0 + x (masked, i.e. not visible).

    None when nothing in the tile is masked (it lies on or left of the diagonal), unless `always`.
    """
    if not always and c0 + c - 1 <= r0:
        return None
    return np.arange(c0, c0 + c)[None, :] > np.arange(r0, r0 + r)[:, None]


def tile_sums(n: int, block_r: int, block_c: int, causal: bool) -> tuple[int, int, int]:
    """(Σ tile rows, Σ tile cols, Σ tile rows·cols) over the computed tiles (i, j), exact Python integers.

    Σ tile rows counts, for each computed tile, the rows of its Q block (what re-reading Q_i per tile costs);
    Σ tile cols the rows of its K/V block; Σ rows·cols its S entries (FLOPs).

    Under the causal rule the full row blocks i < Tr − 1 (k = i + 1 = 1 … Tr − 1) see J = ⌈k·Br/Bc⌉ column
    blocks; their sum is one :func:`floor_sum`, and J = Tc (where C = N, not J·Bc) holds for the last
    Tr − 1 − ⌊(Tc − 1)·Bc/Br⌋ of them. The ragged last row block sees all Tc blocks (its last row is N − 1).
    O(log N) work and no arrays, so N = 10¹² costs what N = 10³ does, with no int64 overflow.
    """
    n, br, bc = int(n), int(block_r), int(block_c)
    tr, tc = n_blocks(n, br), n_blocks(n, bc)
    if not causal:
        return n * tc, n * tr, n * n
    full = tr - 1  # row blocks 0 … Tr − 2 are full (Br rows)
    j_full = floor_sum(full, bc, br, br + bc - 1)  # Σ_k ⌈k·Br/Bc⌉ = Σ_k ⌊(k·Br + Bc − 1)/Bc⌋, k = 1 … Tr − 1
    see_all = max(0, full - (tc - 1) * bc // br)  # full row blocks with J = Tc (they see key rows up to N)
    cols_full = bc * j_full - (tc * bc - n) * see_all  # Σ C_i over the full row blocks
    r_last = n - full * br
    return br * j_full + r_last * tc, cols_full + n, br * cols_full + r_last * n


def visible_tiles(n: int, block_r: int, block_c: int, causal: bool) -> int:
    """Number of computed tiles (i, j): Tr·Tc, or under the causal rule Σ_i J_i (exact, O(log N))."""
    n, br, bc = int(n), int(block_r), int(block_c)
    tr, tc = n_blocks(n, br), n_blocks(n, bc)
    if not causal:
        return tr * tc
    return floor_sum(tr - 1, bc, br, br + bc - 1) + tc


def floor_sum(count: int, m: int, a: int, b: int) -> int:
    """Σ_{i=0}^{count−1} ⌊(a·i + b)/m⌋ for integers count ≥ 0, m ≥ 1, a, b ≥ 0, exactly in O(log) steps (the
    Euclid-like reduction known from AtCoder Library's ``floor_sum``).

    >>> floor_sum(4, 3, 2, 1), sum((2 * i + 1) // 3 for i in range(4))
    (4, 4)
    """
    total = 0
    while True:
        if a >= m:
            total += (count - 1) * count // 2 * (a // m)
            a %= m
        if b >= m:
            total += count * (b // m)
            b %= m
        y_max = a * count + b
        if y_max < m:
            return total
        count, b = divmod(y_max, m)
        m, a = a, m
