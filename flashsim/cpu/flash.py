"""Blocked FlashAttention forward on the CPU, compiled with numba (chapter 10).

Each Q block is one task, and the tasks run in parallel on the cores (a CPU core plays the part of an SM running
one thread block). For each K/V block the task computes the score tile ``S = Q_blk K_blk^T`` in a small buffer,
updates the running row max ``m`` and row sum ``l``, rescales its output accumulator and adds ``P V_blk``. Its
extra memory is O(N d): padded copies of Q, K^T and V, the output, and a few (block_r x block_c) tiles per core.
No N x N array is ever allocated.
"""
from __future__ import annotations

import math

import numpy as np
from numba import get_num_threads, get_thread_id, njit, prange, set_parallel_chunksize

from flashsim.cpu.blocks import _PANEL, _VEC, TILE_COLS, TILE_ROWS, _round_up, default_blocks, effective_blocks
from flashsim.cpu.intrinsics import _FASTMATH, _exp2, _fmax, _gemm_set, _gemm_tile
from flashsim.cpu.validate import check_block, check_qkv
from flashsim.errors import FlashsimError
from flashsim.model.attention.online_softmax import LN2, LOG2E

# --------------------------------------------------------------------------------------------------------------
# The kernel
# --------------------------------------------------------------------------------------------------------------
_NEG_BIG = np.float32(-1.0e30)  # initial running max: finite, so fastmath's no-infinity assumption holds


@njit(inline="always")
def _qk_tile(s, s_off, ldc, qp, q_off, dp, ktp, j, ncols):
    """S[4 x ncols] = Q[4 x dp] @ K^T[dp x ncols] from the packed K^T, in pieces that stay inside one panel."""
    col = 0
    while col < ncols:
        g = j + col
        within = g % _PANEL
        nv = min((ncols - col) // _VEC, (_PANEL - within) // _VEC)
        b_off = (g - within) * dp + within
        _gemm_set(nv, s, s_off + col, ldc, qp, q_off, dp, ktp, b_off, _PANEL, dp)
        col += nv * _VEC


@njit(parallel=True, cache=True, fastmath=_FASTMATH)
def _prepare(q, k, v, scale, dp, qp, ktp, vp):
    """Fill the padded copies, once per call (O(N d)): Q*scale, K^T packed in panels, V (padding stays 0).

    K^T is stored as panels of 64 columns: panel p holds K^T[:, 64p:64p+64] contiguously (dp x 64), so the
    micro-kernel streams through 256-byte rows that sit next to each other. Plain K^T (row stride N) would put
    the 64 rows of one tile N*4 bytes apart, all in the same few L1 sets, and thrash the cache.
    """
    bh, n, d = q.shape
    for h in prange(bh):
        for i in range(n):
            for c in range(d):
                qp[h, i * dp + c] = q[h, i, c] * scale
                vp[h, i * dp + c] = v[h, i, c]
        for i0 in range(0, n, _PANEL):
            for c in range(d):
                for i in range(i0, min(i0 + _PANEL, n)):
                    ktp[h, i0 * dp + c * _PANEL + (i - i0)] = k[h, i, c]


@njit(parallel=True, cache=True, fastmath=_FASTMATH)
def _flash_forward(qp, ktp, vp, out, lse, n, d, dp, br, bc, causal, ws_s, ws_acc, ws_ml):
    """Blocked FlashAttention forward with the online softmax; one parallel task per (head, Q block).

    ws_* are per-thread workspaces (row t for thread t): the score tile, the output accumulator, and the running
    max and sum. They are allocated by the caller, so they are counted by tracemalloc like every other array.
    """
    bh = qp.shape[0]
    nqb = (n + br - 1) // br
    ntasks = bh * nqb
    for t in prange(ntasks):
        h = t // nqb
        qb = nqb - 1 - t % nqb  # last Q blocks first: under a causal mask they are the longest
        i0 = qb * br
        rows = min(br, n - i0)
        rows_pad = (rows + TILE_ROWS - 1) // TILE_ROWS * TILE_ROWS
        qh = qp[h]
        kh = ktp[h]
        vh = vp[h]
        tid = get_thread_id()
        s = ws_s[tid]  # score tile, then probabilities P (in place): br x bc
        acc = ws_acc[tid]  # unnormalized output rows: br x dp
        m = ws_ml[tid, 0]  # running row max (log2 units)
        l = ws_ml[tid, 1]  # running row sum
        acc[:] = 0.0
        m[:] = _NEG_BIG
        l[:] = 0.0
        j_end = n
        if causal:
            j_end = min(n, i0 + rows)
        for j0 in range(0, j_end, bc):
            cols = min(bc, n - j0)
            cols_pad = (cols + TILE_COLS - 1) // TILE_COLS * TILE_COLS
            # S = Q_blk @ K_blk^T (already scaled by sm_scale * log2 e)
            for r in range(0, rows_pad, TILE_ROWS):
                _qk_tile(s, r * bc, bc, qh, (i0 + r) * dp, dp, kh, j0, cols_pad)
            # online softmax, fused: new max, exponentiate in place, row sum, rescale the accumulator
            for r in range(rows_pad):
                valid = cols
                if causal:
                    valid = min(cols, i0 + r - j0 + 1)
                valid = max(valid, 0)
                row = s[r * bc:r * bc + cols_pad]  # a view: plain indices keep the loops vectorizable
                m_old = m[r]
                m_new = m_old
                for j in range(valid):
                    m_new = _fmax(m_new, row[j])
                total = np.float32(0.0)
                for j in range(valid):
                    p = _exp2(row[j] - m_new)
                    row[j] = p
                    total += p
                for j in range(valid, cols_pad):
                    row[j] = np.float32(0.0)
                alpha = _exp2(m_old - m_new)
                l[r] = l[r] * alpha + total
                m[r] = m_new
                if alpha != np.float32(1.0):
                    arow = acc[r * dp:(r + 1) * dp]
                    for c in range(dp):
                        arow[c] *= alpha
            # O_blk += P @ V_blk
            for r in range(0, rows_pad, TILE_ROWS):
                _gemm_tile(True, acc, r * dp, dp, s, r * bc, bc, vh, j0 * dp, dp, cols_pad, dp)
        for r in range(rows):
            inv = np.float32(1.0) / l[r]
            for c in range(d):
                out[h, i0 + r, c] = acc[r * dp + c] * inv
            lse[h, i0 + r] = (m[r] + np.log2(l[r])) * np.float32(LN2)


def flash_attention_cpu(q, k, v, causal=False, sm_scale=None, block_r=None, block_c=None, return_lse=False):
    """FlashAttention forward on the CPU (chapter 10): ``softmax(q k^T * sm_scale) v`` without an N x N array.

    Parameters
    ----------
    q, k, v : float32 arrays of shape (N, d) or (B, H, N, d), all the same shape.
    causal : mask out key j > query i (chapter 08).
    sm_scale : score scale, default ``1 / sqrt(d)``.
    block_r, block_c : Q rows and K/V rows per block; default :func:`default_blocks`. The kernel rounds them up
        to a multiple of 4 and 16 (:func:`effective_blocks`); N need not be a multiple of either.
    return_lse : also return the log-sum-exp of each row's scaled scores, shape (N,) or (B, H, N) (the backward
        pass of chapter 07 uses it). It costs nothing extra: the kernel keeps it anyway.

    Returns the output, float32 with q's shape (and the log-sum-exp as float32 when ``return_lse``).
    Extra memory is O(N d) (see :func:`flash_extra_bytes`), never O(N^2).
    """
    check_qkv(q, k, v)
    block_r = check_block(block_r, "block_r")
    block_c = check_block(block_c, "block_c")
    shape = q.shape
    n, d = shape[-2], shape[-1]
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(d)
    elif not isinstance(sm_scale, (int, float, np.floating, np.integer)) or not math.isfinite(sm_scale) \
            or sm_scale <= 0:
        raise FlashsimError(f"sm_scale={sm_scale!r} must be a positive finite number, or None for 1/sqrt(d)")
    if block_r is None or block_c is None:
        dr, dc = default_blocks(d)
        block_r = block_r or dr
        block_c = block_c or dc
    br, bc = effective_blocks(block_r, block_c)
    dp = _round_up(d, TILE_COLS)
    npad_r = _round_up(n, br) + TILE_ROWS  # a 4-row tile may reach past the last row
    npad_c = _round_up(_round_up(n, bc) + TILE_COLS, _PANEL)
    q3 = q.reshape(-1, n, d)
    k3 = k.reshape(-1, n, d)
    v3 = v.reshape(-1, n, d)
    bh = q3.shape[0]
    # every array is allocated here, by numpy, so tracemalloc sees all of the kernel's memory (chapter 06)
    qp = np.zeros((bh, npad_r * dp), np.float32)
    ktp = np.zeros((bh, dp * npad_c), np.float32)
    vp = np.zeros((bh, npad_c * dp), np.float32)
    _prepare(q3, k3, v3, np.float32(sm_scale * LOG2E), dp, qp, ktp, vp)
    threads = get_num_threads()
    ws_s = np.empty((threads, br * bc), np.float32)
    ws_acc = np.empty((threads, br * dp), np.float32)
    ws_ml = np.empty((threads, 2, br), np.float32)
    out = np.empty((bh, n, d), np.float32)
    lse = np.empty((bh, n), np.float32)
    # hand out the (head, Q block) tasks one at a time (dynamic scheduling): a core busy with something else, or a
    # short causal block, then delays nobody
    old_chunk = set_parallel_chunksize(1)
    try:
        _flash_forward(qp, ktp, vp, out, lse, n, d, dp, br, bc, bool(causal), ws_s, ws_acc, ws_ml)
    finally:
        set_parallel_chunksize(old_chunk)
    out = out.reshape(shape)
    if return_lse:
        return out, lse.reshape(shape[:-1])
    return out
