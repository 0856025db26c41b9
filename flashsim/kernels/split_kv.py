"""Split-KV ("flash-decoding") attention in Triton, and the logsumexp combine step (chapter 13).

At decoding time a query block is tiny (one new token per sequence: Nq = 1) while K/V hold the whole context
(N = 64k). The FA2 forward kernel launches one program per (Q row block, batch*head): at batch 1 that is a
handful of programs for 132 SMs, each streaming all N keys alone. Flash-decoding (Dao, Haziza, Massa, Sizov 2023)
splits K/V into ``num_splits`` chunks, one program per (chunk, Q row block, batch*head); each writes a *partial*
output O_s (normalised over its own chunk) and the logsumexp L_s of its chunk's scores. A second, small kernel
merges the partials exactly as chapter 04's (m, l) merge does (the one definition of it is
:func:`flashsim.model.attention.online_softmax.combine_partials`, which the tests check this kernel against),
with L = m + log l::

    L = log Σ_s e^(L_s),        O = Σ_s e^(L_s − L) · O_s

so the result is the same function as one-pass attention, to rounding.

Traffic per (batch, head), S = number of non-empty chunks (closed form in
:func:`flashsim.model.multi.closed_forms.split_kv_bytes`):
    split kernel:   reads Q S times (Nq·d·b each), K and V once (N·d·b each);
                    writes O_partial S·Nq·d fp32 and LSE_partial S·Nq fp32;
    combine kernel: reads O_partial and LSE_partial once; writes O (Nq·d·b) and LSE (Nq fp32).

``num_splits=1`` is "the same kernel without the split": one program streams all of K/V, and the combine
step is skipped (its single partial already is the answer, written straight to O).
"""
from __future__ import annotations

import numbers

import torch
import triton
import triton.language as tl

from flashsim.errors import FlashsimError
from flashsim.kernels._common import (LN2, LOG2E, check_block, check_flag, check_launch, check_tensors, head_block,
                                      interpreting, next_pow2, poison_like, scale_of)


@triton.jit
def _split_kv_kernel(Q, K, V, OP, LSEP, sm_scale,
                     stride_qb, stride_qh, stride_qn, stride_qd,
                     stride_kb, stride_kh, stride_kn, stride_kd,
                     stride_vb, stride_vh, stride_vn, stride_vd,
                     stride_ob, stride_oh, stride_on, stride_od,
                     H, NQ, N, D, CHUNK, NUM_SPLITS,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    pid_s = tl.program_id(0)                      # which K/V chunk
    pid_m = tl.program_id(1)                      # which Q row block
    pid_bh = tl.program_id(2)                     # which (batch, head)
    b = pid_bh // H
    h = pid_bh % H
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    m_valid = offs_m < NQ
    d_valid = offs_d < D

    q_ptrs = Q + b * stride_qb + h * stride_qh + offs_m[:, None] * stride_qn + offs_d[None, :] * stride_qd
    # reads Q once per chunk: S*Nq*d elements per head
    q = tl.load(q_ptrs, mask=m_valid[:, None] & d_valid[None, :], other=0.0)   # (BLOCK_M, BLOCK_D)
    k_base = K + b * stride_kb + h * stride_kh
    v_base = V + b * stride_vb + h * stride_vh
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    qk_scale = sm_scale * LOG2E

    lo = pid_s * CHUNK
    hi = tl.minimum(lo + CHUNK, N)
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        n_valid = cols < hi
        kv_mask = n_valid[:, None] & d_valid[None, :]
        # reads each K and V row once over all chunks: N*d elements each per head
        k = tl.load(k_base + cols[:, None] * stride_kn + offs_d[None, :] * stride_kd, mask=kv_mask, other=0.0)
        qk = tl.dot(q, tl.trans(k)) * qk_scale                       # (BLOCK_M, BLOCK_N)
        qk = tl.where(n_valid[None, :], qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(v_base + cols[:, None] * stride_vn + offs_d[None, :] * stride_vd, mask=kv_mask, other=0.0)
        acc += tl.dot(p.to(v.dtype), v)
        m_i = m_new

    acc = acc / l_i[:, None]
    lse = (m_i + tl.math.log2(l_i)) * LN2             # natural-log logsumexp of this chunk
    # partial O: (B*H, S, Nq, D) fp32 (or O itself, in q's dtype, when there is one chunk); LSE: (B*H, S, Nq)
    o_ptrs = OP + b * stride_ob + h * stride_oh + pid_s * NQ * stride_on \
        + offs_m[:, None] * stride_on + offs_d[None, :] * stride_od
    tl.store(o_ptrs, acc.to(OP.dtype.element_ty), mask=m_valid[:, None] & d_valid[None, :])
    tl.store(LSEP + (pid_bh * NUM_SPLITS + pid_s) * NQ + offs_m, lse, mask=m_valid)


@triton.jit
def _combine_kernel(OP, LSEP, O, LSE,
                    stride_ob, stride_oh, stride_on, stride_od,
                    H, NQ, D, NUM_SPLITS,
                    BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    m_valid = offs_m < NQ
    mask = m_valid[:, None] & (offs_d[None, :] < D)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)    # running max of the chunks' logsumexps
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)                  # Σ e^(L_s − m)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)         # Σ e^(L_s − m) O_s
    for s in range(0, NUM_SPLITS):
        # reads LSE_partial and O_partial once: S*Nq and S*Nq*d fp32 elements per head
        lse_s = tl.load(LSEP + (pid_bh * NUM_SPLITS + s) * NQ + offs_m, mask=m_valid, other=0.0)
        o_s = tl.load(OP + pid_bh * NUM_SPLITS * NQ * D + (s * NQ + offs_m[:, None]) * D + offs_d[None, :],
                      mask=mask, other=0.0)
        m_new = tl.maximum(m_i, lse_s)
        alpha = tl.exp(m_i - m_new)                              # the chapter 04 merge, with l_s = e^(L_s − m_s)
        w = tl.exp(lse_s - m_new)
        l_i = l_i * alpha + w
        acc = acc * alpha[:, None] + w[:, None] * o_s
        m_i = m_new
    out = acc / l_i[:, None]
    o_ptrs = O + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_on + offs_d[None, :] * stride_od
    # writes O once: Nq*d elements per head; LSE: Nq fp32
    tl.store(o_ptrs, out.to(O.dtype.element_ty), mask=mask)
    tl.store(LSE + pid_bh * NQ + offs_m, m_i + tl.log(l_i), mask=m_valid)


def split_plan(n: int, num_splits: int, block_n: int) -> tuple[int, int]:
    """(chunk, splits): chunk = keys per split, a whole number of BLOCK_N tiles; splits = non-empty chunks.

    >>> split_plan(1000, 4, 32)
    (256, 4)
    >>> split_plan(100, 8, 32)      # fewer keys than 8 tiles: only 4 chunks are non-empty
    (32, 4)
    """
    if isinstance(num_splits, bool) or not isinstance(num_splits, numbers.Integral) or num_splits < 1:
        raise FlashsimError(f"num_splits={num_splits} must be >= 1 (1 = the kernel without the split)")
    tiles = triton.cdiv(n, block_n)
    chunk = triton.cdiv(tiles, min(num_splits, tiles)) * block_n
    return chunk, triton.cdiv(n, chunk)


def default_num_splits(batch_heads: int, n: int, num_sms: int | None = None, block_n: int = 64) -> int:
    """Enough chunks to give every SM about two programs, no more than there are K/V tiles (chapter 13)."""
    if num_sms is None:
        num_sms = torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 4
    want = max(1, (2 * num_sms + batch_heads - 1) // batch_heads)
    return max(1, min(want, triton.cdiv(n, block_n)))


def split_kv_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, num_splits: int | None = None,
                       sm_scale=None, block_m: int | None = None, block_n: int | None = None,
                       num_warps: int | None = None, return_partials: bool = False):
    """Decoding attention O = softmax(Q Kᵀ · sm_scale) V with K/V split into chunks (flash-decoding; chapter 13).

    q: (B, H, Nq, d), Nq small (1 when decoding); k, v: (B, H, N, d). No causal mask: every query sees all N keys
    (the new token attends to the whole cache). Returns (o, lse): o (B, H, Nq, d) in q's dtype, lse (B, H, Nq)
    fp32. ``num_splits=1``: the same kernel without the split (one program per row block and head).
    ``return_partials=True`` also returns (o_partial (B, H, S, Nq, d) fp32, lse_partial (B, H, S, Nq)).
    """
    check_tensors(("q", "k", "v"), q, k, v, ndim=4)
    B, H, NQ, d = q.shape
    if k.shape != v.shape or k.shape[:2] != q.shape[:2] or k.shape[3] != d:
        raise FlashsimError(f"shapes do not match: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}: "
                            "use q (B, H, Nq, d) and k, v (B, H, N, d)")
    N = k.shape[2]
    if min(B, H, NQ, N, d) < 1:
        raise FlashsimError(f"empty input: q {tuple(q.shape)}, k {tuple(k.shape)}")
    return_partials = check_flag("return_partials", return_partials)
    num_warps, _ = check_launch(num_warps)
    block_m = check_block("block_m", max(16, min(64, next_pow2(NQ))) if block_m is None else block_m)
    block_n = check_block("block_n", (32 if interpreting() else 64) if block_n is None else block_n)
    if num_splits is None:
        num_splits = default_num_splits(B * H, N, block_n=block_n)
    chunk, splits = split_plan(N, num_splits, block_n)
    scale = scale_of(sm_scale, d)
    block_d = head_block(d)
    extra = {"num_warps": num_warps} if num_warps is not None else {}
    lse = poison_like(q, (B, H, NQ), torch.float32)
    if splits == 1 and not return_partials:
        o = poison_like(q)
        op, lsep = o, lse
    else:
        o = poison_like(q)
        op = poison_like(q, (B, H, splits, NQ, d), torch.float32)
        lsep = poison_like(q, (B, H, splits, NQ), torch.float32)
    # op's strides over (b, h, row, d); chunk s starts s*NQ rows further
    so = (op.stride(0), op.stride(1), op.stride(-2), op.stride(-1))
    grid = (splits, triton.cdiv(NQ, block_m), B * H)
    _split_kv_kernel[grid](q, k, v, op, lsep, scale, *q.stride(), *k.stride(), *v.stride(), *so,
                           H, NQ, N, d, chunk, splits, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=block_d, **extra)
    if op is o:
        return o, lse
    _combine_kernel[(triton.cdiv(NQ, block_m), B * H)](op, lsep, o, lse, *o.stride(), H, NQ, d, splits,
                                                       BLOCK_M=block_m, BLOCK_D=block_d)
    if return_partials:
        return o, lse, (op, lsep)
    return o, lse

