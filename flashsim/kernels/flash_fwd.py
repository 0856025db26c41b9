"""FlashAttention-2 forward in Triton (chapter 05; the causal variant is chapter 08).

Loop order (FA2): one program per (Q row block, batch*head). It loads its Q tile once, then streams every K/V
tile past it, keeping a running max ``m``, running sum ``l`` and an fp32 output accumulator in SRAM/registers.
S and P never touch global memory. It stores O and the logsumexp (for the backward pass).

Traffic per (batch, head), with T_m = ceil(N / BLOCK_M) Q row blocks (the kernel view in
:mod:`flashsim.model.kernel_io` adds these up exactly):
    Q: N*d elements read once; K, V: N*d elements read once per Q row block (non-causal);
    causal: Q row block i reads K/V rows [0, min((i+1)*BLOCK_M, N)) rounded up to whole BLOCK_N tiles
    (fully masked tiles are skipped); O: N*d written once; LSE: N fp32 written once.
Masking costs arithmetic on every score, so (as FA2 does) it runs only where needed: the tiles left of the
diagonal (causal) and all whole tiles (non-causal) skip it; only diagonal tiles and a ragged last tile pay.
Head dims that are not powers of two (80, 96) are padded to the next power of two and masked, so padded columns
are never loaded or stored. Ragged N is masked the same way.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from flashsim.errors import FlashsimError
from flashsim.kernels._common import (LN2, LOG2E, check_blocks, check_flag, check_launch, check_qkv,
                                      forward_launch_options, head_block, output_like, scale_of, tensor_desc, tuned_config, use_tma)
from flashsim.kernels.gluon import forward_path, gluon_forward
from flashsim.kernels.runtime import interpreting


@triton.jit
def _fwd_tiles(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
               desc_k, desc_v, b, h, offs_m, offs_n, offs_d, d_valid, N, qk_scale, lo, hi,
               MASK: tl.constexpr, CAUSAL: tl.constexpr, USE_TMA: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_D: tl.constexpr):
    """Stream K/V tiles [lo, hi) past one Q tile. MASK=False for tiles every query of the block fully sees
    (no key past N, none after the query): the FA2 trick of skipping the masking arithmetic there.
    USE_TMA: K and V tiles come through tensor descriptors (Hopper's copy engine, chapter 12), not pointers."""
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        n_valid = cols < N
        kv_mask = n_valid[:, None] & d_valid[None, :]
        if USE_TMA:
            # reads K once per Q row block: N*d elements per row block (causal: up to the diagonal)
            k = desc_k.load([b, h, start_n, 0]).reshape(BLOCK_N, BLOCK_D)   # rows past N arrive as 0
        else:
            k_ptrs = k_base + cols[:, None] * stride_kn + offs_d[None, :] * stride_kd
            # reads K once per Q row block: N*d elements per row block (causal: up to the diagonal)
            k = tl.load(k_ptrs, mask=kv_mask, other=0.0)             # (BLOCK_N, BLOCK_D)
        qk = tl.dot(q, tl.trans(k))                                  # (BLOCK_M, BLOCK_N) scores, in SRAM only
        if MASK:
            keep = n_valid[None, :]                                  # key rows past N score -inf
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= cols[None, :])     # keys after the query score -inf
            qk = tl.where(keep, qk * qk_scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(qk, 1))
            qk = qk - m_new[:, None]
        else:
            m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)       # scale the row max, not every score ...
            qk = qk * qk_scale - m_new[:, None]                      # ... and fold the scale into one FMA
        p = tl.math.exp2(qk)                                         # (BLOCK_M, BLOCK_N)
        alpha = tl.math.exp2(m_i - m_new)                            # rescales what was summed so far
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if USE_TMA:
            # reads V once per Q row block: N*d elements per row block (causal: up to the diagonal)
            v = desc_v.load([b, h, start_n, 0]).reshape(BLOCK_N, BLOCK_D)
        else:
            v_ptrs = v_base + cols[:, None] * stride_vn + offs_d[None, :] * stride_vd
            # reads V once per Q row block: N*d elements per row block (causal: up to the diagonal)
            v = tl.load(v_ptrs, mask=kv_mask, other=0.0)             # (BLOCK_N, BLOCK_D)
        acc = tl.dot(p.to(v.dtype), v, acc)                          # accumulate in place (one MMA chain)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _flash_fwd_kernel(Q, K, V, O, LSE, sm_scale, DESC_Q, DESC_K, DESC_V, DESC_O,
                      stride_qb, stride_qh, stride_qn, stride_qd,
                      stride_kb, stride_kh, stride_kn, stride_kd,
                      stride_vb, stride_vh, stride_vn, stride_vd,
                      stride_ob, stride_oh, stride_on, stride_od,
                      H, N, D,
                      CAUSAL: tl.constexpr, USE_TMA: tl.constexpr, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    pid_m = tl.program_id(0)                      # which Q row block
    if CAUSAL:                                    # causal: the last row blocks see the most keys, so launch them
        pid_m = tl.num_programs(0) - 1 - pid_m    # first (longest first: no long program left for the tail)
    pid_bh = tl.program_id(1)                     # which (batch, head)
    b = pid_bh // H
    h = pid_bh % H
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)   # (BLOCK_M,) query rows
    offs_n = tl.arange(0, BLOCK_N)                      # (BLOCK_N,) key rows within a tile
    offs_d = tl.arange(0, BLOCK_D)                      # (BLOCK_D,) head dim, padded to a power of two
    m_valid = offs_m < N
    d_valid = offs_d < D

    if USE_TMA:
        # reads Q once: N*d elements per head, over all row blocks
        q = DESC_Q.load([b, h, pid_m * BLOCK_M, 0]).reshape(BLOCK_M, BLOCK_D)
    else:
        q_ptrs = Q + b * stride_qb + h * stride_qh + offs_m[:, None] * stride_qn + offs_d[None, :] * stride_qd
        # reads Q once: N*d elements per head, over all row blocks
        q = tl.load(q_ptrs, mask=m_valid[:, None] & d_valid[None, :], other=0.0)   # (BLOCK_M, BLOCK_D)

    k_base = K + b * stride_kb + h * stride_kh
    v_base = V + b * stride_vb + h * stride_vh
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)   # running max (log2 units)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)                 # running sum of exp
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)        # running (unnormalised) output
    qk_scale = sm_scale * LOG2E                    # fold log2(e) in: exp2 is cheaper than exp

    if CAUSAL:
        lo = (pid_m * BLOCK_M) // BLOCK_N * BLOCK_N  # tiles left of the diagonal: seen whole by every query
        hi = tl.minimum((pid_m + 1) * BLOCK_M, N)    # K/V tiles past the diagonal are fully masked: skipped
    else:
        lo = N // BLOCK_N * BLOCK_N                  # whole tiles; only a ragged last tile needs a mask
        hi = N
    acc, l_i, m_i = _fwd_tiles(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
                               DESC_K, DESC_V, b, h, offs_m, offs_n, offs_d, d_valid, N, qk_scale, 0, lo,
                               MASK=False, CAUSAL=CAUSAL, USE_TMA=USE_TMA, BLOCK_N=BLOCK_N, BLOCK_D=BLOCK_D)
    acc, l_i, m_i = _fwd_tiles(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
                               DESC_K, DESC_V, b, h, offs_m, offs_n, offs_d, d_valid, N, qk_scale, lo, hi,
                               MASK=True, CAUSAL=CAUSAL, USE_TMA=USE_TMA, BLOCK_N=BLOCK_N, BLOCK_D=BLOCK_D)

    acc = acc / l_i[:, None]
    if USE_TMA:
        # writes O once: N*d elements per head (the copy drops rows past N)
        DESC_O.store([b, h, pid_m * BLOCK_M, 0], acc.to(DESC_O.dtype).reshape(1, 1, BLOCK_M, BLOCK_D))
    else:
        o_ptrs = O + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_on + offs_d[None, :] * stride_od
        # writes O once: N*d elements per head
        tl.store(o_ptrs, acc.to(O.dtype.element_ty), mask=m_valid[:, None] & d_valid[None, :])
    lse = (m_i + tl.math.log2(l_i)) * LN2             # natural-log logsumexp, fp32
    # writes LSE once: N fp32 elements per head
    tl.store(LSE + pid_bh * N + offs_m, lse, mask=m_valid)


def flash_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, sm_scale=None,
                  block_m: int | None = None, block_n: int | None = None, num_warps: int | None = None,
                  num_stages: int | None = None, tma: bool | None = None,
                  gluon: bool | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """O = softmax(Q Kᵀ · sm_scale) V, FlashAttention-2 style (chapter 05; causal: chapter 08).

    q, k, v: (B, H, N, d). Returns (o, lse): o (B, H, N, d) in q's dtype, lse (B, H, N) fp32 natural-log
    logsumexp of each score row (what the backward pass needs).
    ``block_m``, ``block_n``: Q rows and K/V rows per tile (BLOCK_M = the paper's Br, BLOCK_N = Bc: the one
    vocabulary, :mod:`flashsim.model.attention.visibility`); None = :func:`flashsim.kernels.default_blocks`.
    ``tma``: load Q, K, V and store O through tensor descriptors (Hopper's TMA copy engine, chapter 12) instead
    of pointers. None (default): on a GPU that supports it, for the head dims validated on an H200 (64, 128), with
    the launch configuration tuned for it when no blocks are given; never by default in the interpreter. The
    bytes moved are the same either way.
    ``gluon``: None (default): on a Hopper GPU, when no launch parameter is given and the inputs are covered (fp16 or
    bf16, d in {64, 128}: :func:`flashsim.kernels.gluon.forward_path`), the FA3-style Gluon forward computes (o, lse)
    in this same convention; False: always this Triton kernel; True: the Gluon kernel, or an error saying why not.
    """
    B, H, N, d = check_qkv(q, k, v)
    causal = check_flag("causal", causal)
    scale = scale_of(sm_scale, d)
    gluon = None if gluon is None else check_flag("gluon", gluon)
    if gluon or (gluon is None and not interpreting() and block_m is None and block_n is None
                 and num_warps is None and num_stages is None and tma is None):
        path, why = forward_path(q, k, v, causal)
        if path == "gluon":
            return gluon_forward(q, k, v, causal=causal, sm_scale=scale)
        if gluon:
            raise FlashsimError(f"gluon=True: {why}; or pass gluon=False for the Triton kernel")
    num_warps, num_stages = check_launch(num_warps, num_stages)
    block_d = head_block(d)
    with_tma = use_tma(tma, (q, k, v), d, block_d)
    tuned = tuned_config("flash_fwd", block_d, causal) if with_tma and block_m is None and block_n is None else None
    if tuned:
        block_m, block_n = tuned[:2]
        num_warps = num_warps or tuned[2]
        num_stages = num_stages or tuned[3]
    block_m, block_n = check_blocks("flash_fwd", d, block_m, block_n)
    o = output_like(q)                                        # (B, H, N, d)
    lse = output_like(q, (B, H, N), torch.float32)            # (B, H, N)
    grid = (triton.cdiv(N, block_m), B * H)
    extra = forward_launch_options(block_d, block_m, num_warps, num_stages, block_n, with_tma)
    descs = ((tensor_desc(q, block_m, block_d), tensor_desc(k, block_n, block_d), tensor_desc(v, block_n, block_d),
              tensor_desc(o, block_m, block_d)) if with_tma else (None,) * 4)
    _flash_fwd_kernel[grid](q, k, v, o, lse, scale, *descs,
                            *q.stride(), *k.stride(), *v.stride(), *o.stride(),
                            H, N, d, CAUSAL=causal, USE_TMA=with_tma, BLOCK_M=block_m, BLOCK_N=block_n,
                            BLOCK_D=block_d, **extra)
    return o, lse
