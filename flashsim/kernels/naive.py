"""Standard (naive) attention in three Triton launches (chapter 02).

1. ``_scores_kernel``: S = Q Kᵀ · scale, one program per (BLOCK_M × BLOCK_N) tile of S. S is written to global
   memory (fp32, N×N per head).
2. ``_softmax_kernel``: P = softmax(S) row by row. Reads S back, writes P (fp32, N×N per head).
3. ``_pv_kernel``: O = P V, one program per Q row block, streaming P tiles and V tiles.

This is the algorithm FlashAttention improves on: the N×N matrices S and P each make a round trip through HBM.
Causal, as a standard implementation does it: S is still materialised in full. Tiles of S wholly above the
diagonal load nothing (no Q Kᵀ product) but are stored as -inf; inside diagonal tiles the masked scores are set
to -inf in registers. The softmax launch reads and writes full rows (P is 0 above the diagonal), and the P V
launch skips the P/V tiles wholly above the diagonal. So causality saves little IO here: the N×N round trips
remain. Compare flash_forward, where causal halves the K/V traffic (chapter 08). Masks on loads and stores are
whole tiles or whole rows (only the N bounds), so the GPU issues full-width vector accesses.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from flashsim.kernels._common import check_blocks, check_flag, check_qkv, head_block, next_pow2, poison_like, scale_of


@triton.jit
def _scores_kernel(Q, K, S, sm_scale, stride_qb, stride_qh, stride_qn, stride_qd,
                   stride_kb, stride_kh, stride_kn, stride_kd, H, N, D,
                   CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_bh = tl.program_id(2)
    b = pid_bh // H
    h = pid_bh % H
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    s_ptrs = S + pid_bh * N * N + offs_m[:, None] * N + offs_n[None, :]
    s_mask = (offs_m < N)[:, None] & (offs_n < N)[None, :]
    if CAUSAL:
        if pid_n * BLOCK_N > pid_m * BLOCK_M + BLOCK_M - 1:
            # writes S as -inf in a tile wholly above the diagonal, loading nothing (part of the N*N below)
            tl.store(s_ptrs, tl.full([BLOCK_M, BLOCK_N], float("-inf"), tl.float32), mask=s_mask)
            return
    d_valid = offs_d < D
    # reads Q once per column block of S: N*d elements per column block (causal: tiles on/below the diagonal)
    q = tl.load(Q + b * stride_qb + h * stride_qh + offs_m[:, None] * stride_qn + offs_d[None, :] * stride_qd,
                mask=(offs_m < N)[:, None] & d_valid[None, :], other=0.0)     # (BLOCK_M, BLOCK_D)
    # reads K once per row block of S: N*d elements per row block (causal: tiles on/below the diagonal)
    k = tl.load(K + b * stride_kb + h * stride_kh + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd,
                mask=(offs_n < N)[:, None] & d_valid[None, :], other=0.0)     # (BLOCK_N, BLOCK_D)
    s = tl.dot(q, tl.trans(k)) * sm_scale                                       # (BLOCK_M, BLOCK_N)
    if CAUSAL:
        s = tl.where(offs_m[:, None] >= offs_n[None, :], s, float("-inf"))    # masked in registers
    # writes S once: N*N fp32 elements per head (causal too)
    tl.store(s_ptrs, s, mask=s_mask)


@triton.jit
def _softmax_kernel(S, P, N, ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr):
    pid_r = tl.program_id(0)
    pid_bh = tl.program_id(1)
    rows = pid_r * ROWS + tl.arange(0, ROWS)           # (ROWS,)
    cols = tl.arange(0, BLOCK_COLS)                    # (BLOCK_COLS,) a whole row, padded to a power of two
    mask = (rows < N)[:, None] & (cols < N)[None, :]
    offs = pid_bh * N * N + rows[:, None] * N + cols[None, :]
    # reads S once: N*N fp32 elements per head (causal too: the -inf entries are read like any other)
    s = tl.load(S + offs, mask=mask, other=float("-inf"))          # (ROWS, BLOCK_COLS)
    m = tl.max(s, 1)
    m = tl.where(rows < N, m, 0.0)                                  # padded rows: avoid -inf - -inf
    p = tl.exp(s - m[:, None])
    denom = tl.sum(p, 1)
    p = p / tl.where(denom > 0, denom, 1.0)[:, None]                 # padded rows sum to 0
    # writes P once: N*N fp32 elements per head (causal too: 0 above the diagonal)
    tl.store(P + offs, p, mask=mask)


@triton.jit
def _pv_kernel(P, V, O, stride_vb, stride_vh, stride_vn, stride_vd, stride_ob, stride_oh, stride_on, stride_od,
               H, N, D, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    # at most 4 contiguous elements per thread: P (fp32) is loaded 16 bytes per thread, every 32-byte sector by one
    # instruction (else the compiler gives P the 8 elements V has and splits them in two 16-byte halves, and the
    # GPU requests each P sector twice)
    offs_d = tl.max_contiguous(tl.arange(0, BLOCK_D), 4)
    m_valid = offs_m < N
    d_valid = offs_d < D
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    if CAUSAL:
        hi = tl.minimum((pid_m + 1) * BLOCK_M, N)
    else:
        hi = N
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        p_mask = m_valid[:, None] & (cols < N)[None, :]
        # reads P once: N*N fp32 elements per head (causal: tiles on/below the diagonal; P is 0 above it)
        p = tl.load(P + pid_bh * N * N + offs_m[:, None] * N + cols[None, :], mask=p_mask, other=0.0)
        # reads V once per Q row block: N*d elements per row block (causal: up to the diagonal)
        v = tl.load(V + b * stride_vb + h * stride_vh + cols[:, None] * stride_vn + offs_d[None, :] * stride_vd,
                    mask=(cols < N)[:, None] & d_valid[None, :], other=0.0)      # (BLOCK_N, BLOCK_D)
        acc += tl.dot(p.to(v.dtype), v)
    # writes O once: N*d elements per head
    tl.store(O + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_on + offs_d[None, :] * stride_od,
             acc.to(O.dtype.element_ty), mask=m_valid[:, None] & d_valid[None, :])


def softmax_rows(n: int) -> int:
    """Rows per softmax program: a whole padded row each, at most 16K fp32 values per program."""
    return max(1, min(16, 16384 // next_pow2(n)))


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, sm_scale=None,
                    block_m: int | None = None, block_n: int | None = None, return_intermediates: bool = False):
    """Standard attention in three launches, S and P written to global memory in fp32 (chapter 02).

    q, k, v: (B, H, N, d). Returns o (B, H, N, d); with ``return_intermediates=True``, (o, s, p).
    """
    B, H, N, d = check_qkv(q, k, v)
    causal = check_flag("causal", causal)
    return_intermediates = check_flag("return_intermediates", return_intermediates)
    block_m, block_n = check_blocks("naive", d, block_m, block_n)
    scale = scale_of(sm_scale, d)
    block_d = head_block(d)
    # S and P: (B, H, N, N) fp32, poisoned so an unwritten element shows (causal: the upper triangle stays NaN)
    s = poison_like(q, (B, H, N, N), torch.float32)
    p = poison_like(q, (B, H, N, N), torch.float32)
    o = poison_like(q)                                                 # (B, H, N, d)
    _scores_kernel[(triton.cdiv(N, block_m), triton.cdiv(N, block_n), B * H)](
        q, k, s, scale, *q.stride(), *k.stride(), H, N, d,
        CAUSAL=bool(causal), BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=block_d)
    rows = softmax_rows(N)
    _softmax_kernel[(triton.cdiv(N, rows), B * H)](s, p, N, ROWS=rows,
                                                   BLOCK_COLS=next_pow2(N), num_warps=8 if N >= 1024 else 4)
    _pv_kernel[(triton.cdiv(N, block_m), B * H)](p, v, o, *v.stride(), *o.stride(), H, N, d,
                                                 CAUSAL=bool(causal), BLOCK_M=block_m, BLOCK_N=block_n,
                                                 BLOCK_D=block_d)
    if return_intermediates:
        return o, s, p
    return o
