"""Extra bytes the CPU kernels allocate besides their output, counted from their array shapes (chapters 06, 10).

The terms the GPU kernels share (the N x N matrix, the logsumexp) come from the one peak-memory model,
:mod:`flashsim.model.attention.memory_model`; the padded copies and per-core tiles are this kernel's own.
"""
from __future__ import annotations

import os

from flashsim.cpu.blocks import _PANEL, TILE_COLS, TILE_ROWS, _round_up, default_blocks, effective_blocks
from flashsim.model.attention.memory_model import logsumexp_bytes, score_matrix_bytes


def _threads() -> int:
    """numba's thread count (one task alive per thread), or the core count without numba."""
    try:
        import numba                      # lazily: numba is an optional dependency
    except ImportError:
        return os.cpu_count() or 1
    return numba.get_num_threads()


def flash_extra_bytes(n: int, d: int, block_r: int | None = None, block_c: int | None = None,
                      batch_heads: int = 1, threads: int | None = None) -> int:
    """Bytes :func:`flash_attention_cpu` allocates besides its output, counted from its array shapes.

    Padded Q, K^T and V (O(N d)), the log-sum-exp (O(N)), and per parallel task one S tile, one accumulator and two
    row vectors (O(block_r * (block_c + d))), times the number of tasks alive at once (one per thread).
    """
    if block_r is None or block_c is None:
        dr, dc = default_blocks(d)
        block_r, block_c = block_r or dr, block_c or dc
    br, bc = effective_blocks(block_r, block_c)
    dp = _round_up(d, TILE_COLS)
    npad_r = _round_up(n, br) + TILE_ROWS
    npad_c = _round_up(_round_up(n, bc) + TILE_COLS, _PANEL)
    if threads is None:
        threads = _threads()
    prepared = 4 * batch_heads * (npad_r * dp + 2 * npad_c * dp)
    lse = logsumexp_bytes(n, batch_heads)
    per_task = 4 * (br * bc + br * dp + 2 * br)
    return prepared + lse + threads * per_task


def naive_extra_bytes(n: int, d: int, batch_heads: int = 1) -> int:
    """Bytes :func:`naive_attention_numpy` allocates besides its output: one N x N float32 matrix (S, softmaxed in
    place into P), in the terms of the one peak-memory model, :mod:`flashsim.model.attention.memory_model`."""
    return score_matrix_bytes(n, batch_heads, elem_bytes=4, score_matrices=1)
