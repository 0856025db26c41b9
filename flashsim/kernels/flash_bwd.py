"""FlashAttention-2 backward in Triton, by recomputation (chapter 07).

The forward pass saved only O and the logsumexp L (N floats per head), not the N×N matrix P. The backward pass
recomputes each P tile from Q, K and L, in three launches:

1. ``_bwd_preprocess``: delta_i = sum_j dO_ij * O_ij (one float per row). Reads O and dO once, writes delta.
2. ``_bwd_dkdv``: one program per K/V row block. It loads its K and V tiles once, then streams every Q row block
   past them (causal: only those at or below the diagonal), recomputing P tileᵀ = exp(K Qᵀ·scale − L) and
   accumulating dV += Pᵀ dO and dK += dSᵀ Q · scale, with dS = P ∘ (dO Vᵀ − delta). Writes dK and dV once.
3. ``_bwd_dq``: one program per Q row block. It loads Q, dO, L, delta once, streams K/V tiles (causal: up to the
   diagonal) and accumulates dQ += dS K · scale. Writes dQ once.

No atomics: dQ is recomputed in its own pass, so K/V and Q/dO each stream once per row block of the other
(7 matmuls per (Q block, K/V block) pair), and no two programs ever write the same element: the result is
reproducible bit for bit. As in the forward pass, only tiles on the diagonal (causal) or ragged at N pay for
masking. (FlashAttention-2's own backward adds dQ with fp32 atomics from the K/V pass instead; it is kept as an
experiment, ``benchmarks/experiments/atomic_bwd.py``.)
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from flashsim.errors import FlashsimError
from flashsim.kernels._common import (LOG2E, POINTER_LOADS_H200, check_blocks, check_flag, check_launch, check_qkv,
                                      check_tensors, head_block, output_like, scale_of, tensor_desc, tuned_config,
                                      use_tma)
from flashsim.kernels.gluon import backward_path, gluon_backward
from flashsim.kernels.runtime import interpreting


@triton.jit
def _bwd_preprocess(O, DO, DELTA, stride_ob, stride_oh, stride_on, stride_od,
                    stride_db, stride_dh, stride_dn, stride_dd, H, N, D,
                    BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    mask = (offs_m < N)[:, None] & (offs_d < D)[None, :]
    # reads O once: N*d elements per head
    o = tl.load(O + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_on + offs_d[None, :] * stride_od,
                mask=mask, other=0.0).to(tl.float32)                  # (BLOCK_M, BLOCK_D)
    # reads dO once: N*d elements per head
    do = tl.load(DO + b * stride_db + h * stride_dh + offs_m[:, None] * stride_dn + offs_d[None, :] * stride_dd,
                 mask=mask, other=0.0).to(tl.float32)                 # (BLOCK_M, BLOCK_D)
    delta = tl.sum(o * do, 1)                                         # (BLOCK_M,)
    # writes delta once: N fp32 elements per head
    tl.store(DELTA + pid_bh * N + offs_m, delta, mask=offs_m < N)


@triton.jit
def _dkdv_tiles(dk, dv, k, v, Q, DO, LSE, DELTA, qk_scale, base, pid_bh, stride_n, stride_d,
                desc_q, desc_do, b, h, offs_n, offs_m, offs_d, d_valid, N, lo, hi,
                MASK: tl.constexpr, CAUSAL: tl.constexpr, USE_TMA: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    """Stream Q/dO row blocks [lo, hi) past one K/V tile. MASK=False where every query row of the block is
    below the diagonal and inside N: no masking arithmetic there (the FA2 trick). USE_TMA: Q and dO tiles come
    through tensor descriptors (chapter 12); rows past N arrive as 0, as the masked pointer loads give them."""
    for start_m in range(lo, hi, BLOCK_M):
        rows = start_m + offs_m
        m_valid = rows < N
        q_mask = m_valid[:, None] & d_valid[None, :]
        q_off = base + rows[:, None] * stride_n + offs_d[None, :] * stride_d
        if USE_TMA:
            # reads Q once per K/V row block: N*d elements per row block (causal: from the diagonal down)
            q = desc_q.load([b, h, start_m, 0]).reshape(BLOCK_M, BLOCK_D)
        else:
            # reads Q once per K/V row block: N*d elements per row block (causal: from the diagonal down)
            q = tl.load(Q + q_off, mask=q_mask, other=0.0)             # (BLOCK_M, BLOCK_D)
        # reads L once per K/V row block: N fp32 per row block
        lse = tl.load(LSE + pid_bh * N + rows, mask=m_valid, other=0.0)   # (BLOCK_M,)
        qkT = tl.dot(k, tl.trans(q))                                      # (BLOCK_N, BLOCK_M) = S tileᵀ / scale
        pT = tl.math.exp2(qkT * qk_scale - lse[None, :] * LOG2E)   # recomputed P tileᵀ (exp2)
        if MASK:
            keep = m_valid[None, :]
            if CAUSAL:
                keep = keep & (rows[None, :] >= offs_n[:, None])
            pT = tl.where(keep, pT, 0.0)
        if USE_TMA:
            # reads dO once per K/V row block: N*d elements per row block
            do = desc_do.load([b, h, start_m, 0]).reshape(BLOCK_M, BLOCK_D)
        else:
            # reads dO once per K/V row block: N*d elements per row block
            do = tl.load(DO + q_off, mask=q_mask, other=0.0)           # (BLOCK_M, BLOCK_D)
        dv += tl.dot(pT.to(do.dtype), do)
        # reads delta once per K/V row block: N fp32 per row block
        delta = tl.load(DELTA + pid_bh * N + rows, mask=m_valid, other=0.0)  # (BLOCK_M,)
        dpT = tl.dot(v, tl.trans(do))                                     # (BLOCK_N, BLOCK_M) = dP tileᵀ
        dsT = pT * (dpT - delta[None, :])
        dk += tl.dot(dsT.to(q.dtype), q)
    return dk, dv


@triton.jit
def _bwd_dkdv(Q, K, V, DO, DK, DV, LSE, DELTA, sm_scale, DESC_Q, DESC_DO,
              stride_b, stride_h, stride_n, stride_d,
              H, N, D,
              CAUSAL: tl.constexpr, USE_TMA: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              BLOCK_D: tl.constexpr):
    # Q, K, V, dO, dK, dV share one (B, H, N, d) layout: the wrapper makes them contiguous.
    pid_n = tl.program_id(0)                      # which K/V row block
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    base = b * stride_b + h * stride_h
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    n_valid = offs_n < N
    d_valid = offs_d < D
    kv_mask = n_valid[:, None] & d_valid[None, :]
    kv_off = base + offs_n[:, None] * stride_n + offs_d[None, :] * stride_d
    # reads K once: N*d elements per head
    k = tl.load(K + kv_off, mask=kv_mask, other=0.0)                  # (BLOCK_N, BLOCK_D)
    # reads V once: N*d elements per head
    v = tl.load(V + kv_off, mask=kv_mask, other=0.0)                  # (BLOCK_N, BLOCK_D)
    dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)

    if CAUSAL:
        lo = (pid_n * BLOCK_N // BLOCK_M) * BLOCK_M   # Q row blocks wholly above the diagonal are skipped
        mid = tl.minimum(tl.cdiv((pid_n + 1) * BLOCK_N, BLOCK_M) * BLOCK_M, N)   # end of the diagonal blocks
    else:
        lo = 0
        mid = 0
    whole = N // BLOCK_M * BLOCK_M                   # whole row blocks end here; a ragged last one follows
    full = tl.maximum(mid, whole)
    # [lo, mid): blocks on the diagonal, masked; [mid, full): below it, unmasked; [full, N): ragged, masked
    qk_scale = sm_scale * LOG2E          # exp(x) = exp2(x * log2(e)): fold log2(e) into the scale
    dk, dv = _dkdv_tiles(dk, dv, k, v, Q, DO, LSE, DELTA, qk_scale, base, pid_bh, stride_n, stride_d,
                         DESC_Q, DESC_DO, b, h, offs_n, offs_m, offs_d, d_valid, N, lo, mid,
                         MASK=True, CAUSAL=CAUSAL, USE_TMA=USE_TMA, BLOCK_M=BLOCK_M, BLOCK_D=BLOCK_D)
    dk, dv = _dkdv_tiles(dk, dv, k, v, Q, DO, LSE, DELTA, qk_scale, base, pid_bh, stride_n, stride_d,
                         DESC_Q, DESC_DO, b, h, offs_n, offs_m, offs_d, d_valid, N, mid, full,
                         MASK=False, CAUSAL=CAUSAL, USE_TMA=USE_TMA, BLOCK_M=BLOCK_M, BLOCK_D=BLOCK_D)
    dk, dv = _dkdv_tiles(dk, dv, k, v, Q, DO, LSE, DELTA, qk_scale, base, pid_bh, stride_n, stride_d,
                         DESC_Q, DESC_DO, b, h, offs_n, offs_m, offs_d, d_valid, N, full, N,
                         MASK=True, CAUSAL=CAUSAL, USE_TMA=USE_TMA, BLOCK_M=BLOCK_M, BLOCK_D=BLOCK_D)
    dk = dk * sm_scale
    # writes dK once: N*d elements per head
    tl.store(DK + kv_off, dk.to(DK.dtype.element_ty), mask=kv_mask)
    # writes dV once: N*d elements per head
    tl.store(DV + kv_off, dv.to(DV.dtype.element_ty), mask=kv_mask)


@triton.jit
def _dq_tiles(dq, q, do, lse, delta, K, V, qk_scale, base, stride_n, stride_d,
              desc_k, desc_v, b, h, offs_m, offs_n, offs_d, d_valid, N, lo, hi,
              MASK: tl.constexpr, CAUSAL: tl.constexpr, USE_TMA: tl.constexpr, BLOCK_N: tl.constexpr,
              BLOCK_D: tl.constexpr):
    """Stream K/V tiles [lo, hi) past one Q row block; MASK=False where the block sees every key whole.
    ``lse`` comes in log2 units; USE_TMA: K and V tiles through tensor descriptors (chapter 12)."""
    for start_n in range(lo, hi, BLOCK_N):
        cols = start_n + offs_n
        n_valid = cols < N
        kv_mask = n_valid[:, None] & d_valid[None, :]
        kv_off = base + cols[:, None] * stride_n + offs_d[None, :] * stride_d
        if USE_TMA:
            # reads K and V once per Q row block: N*d elements each per row block (causal: up to the diagonal)
            k = desc_k.load([b, h, start_n, 0]).reshape(BLOCK_N, BLOCK_D)
            # reads V once per Q row block, like K above
            v = desc_v.load([b, h, start_n, 0]).reshape(BLOCK_N, BLOCK_D)
        else:
            # reads K once per Q row block: N*d elements per row block (causal: up to the diagonal)
            k = tl.load(K + kv_off, mask=kv_mask, other=0.0)          # (BLOCK_N, BLOCK_D)
            # reads V once per Q row block: N*d elements per row block (causal: up to the diagonal)
            v = tl.load(V + kv_off, mask=kv_mask, other=0.0)          # (BLOCK_N, BLOCK_D)
        qk = tl.dot(q, tl.trans(k))                                   # (BLOCK_M, BLOCK_N) = S tile / scale
        p = tl.math.exp2(qk * qk_scale - lse[:, None])
        if MASK:
            keep = n_valid[None, :] & (offs_m < N)[:, None]
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= cols[None, :])
            p = tl.where(keep, p, 0.0)
        dp = tl.dot(do, tl.trans(v))                                  # (BLOCK_M, BLOCK_N)
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k)
    return dq


@triton.jit
def _bwd_dq(Q, K, V, DO, DQ, LSE, DELTA, sm_scale, DESC_K, DESC_V,
            stride_b, stride_h, stride_n, stride_d,
            H, N, D,
            CAUSAL: tl.constexpr, USE_TMA: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
            BLOCK_D: tl.constexpr):
    pid_m = tl.program_id(0)                      # which Q row block
    if CAUSAL:                                    # causal: the last row blocks see the most keys, so launch them
        pid_m = tl.num_programs(0) - 1 - pid_m    # first (longest first: no long program left for the tail)
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    base = b * stride_b + h * stride_h
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    m_valid = offs_m < N
    d_valid = offs_d < D
    q_mask = m_valid[:, None] & d_valid[None, :]
    q_off = base + offs_m[:, None] * stride_n + offs_d[None, :] * stride_d
    # reads Q once: N*d elements per head
    q = tl.load(Q + q_off, mask=q_mask, other=0.0)                    # (BLOCK_M, BLOCK_D)
    # reads dO once: N*d elements per head
    do = tl.load(DO + q_off, mask=q_mask, other=0.0)                  # (BLOCK_M, BLOCK_D)
    # reads L once: N fp32 per head
    lse = tl.load(LSE + pid_bh * N + offs_m, mask=m_valid, other=0.0) * LOG2E  # (BLOCK_M,) log2
    # reads delta once: N fp32 per head
    delta = tl.load(DELTA + pid_bh * N + offs_m, mask=m_valid, other=0.0)  # (BLOCK_M,)
    dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    if CAUSAL:
        lo = (pid_m * BLOCK_M) // BLOCK_N * BLOCK_N  # tiles left of the diagonal: unmasked
        hi = tl.minimum((pid_m + 1) * BLOCK_M, N)    # K/V tiles past the diagonal are skipped
    else:
        lo = N // BLOCK_N * BLOCK_N                  # whole tiles unmasked; a ragged last tile masked
        hi = N
    # rows past N load q = dO = 0 and L = delta = 0: their ds is 0, so unmasked tiles need no row mask either
    qk_scale = sm_scale * LOG2E          # exp(x) = exp2(x * log2(e))
    dq = _dq_tiles(dq, q, do, lse, delta, K, V, qk_scale, base, stride_n, stride_d, DESC_K, DESC_V, b, h,
                   offs_m, offs_n, offs_d, d_valid, N, 0, lo, MASK=False, CAUSAL=CAUSAL, USE_TMA=USE_TMA,
                   BLOCK_N=BLOCK_N, BLOCK_D=BLOCK_D)
    dq = _dq_tiles(dq, q, do, lse, delta, K, V, qk_scale, base, stride_n, stride_d, DESC_K, DESC_V, b, h,
                   offs_m, offs_n, offs_d, d_valid, N, lo, hi, MASK=True, CAUSAL=CAUSAL, USE_TMA=USE_TMA,
                   BLOCK_N=BLOCK_N, BLOCK_D=BLOCK_D)
    dq = dq * sm_scale
    # writes dQ once: N*d elements per head
    tl.store(DQ + q_off, dq.to(DQ.dtype.element_ty), mask=q_mask)


def flash_backward(q, k, v, o, lse, do, causal: bool = False, sm_scale=None, block_m: int | None = None,
                   block_n: int | None = None, num_warps: int | None = None, num_stages: int | None = None,
                   tma: bool | None = None, gluon: bool | None = None):
    """Gradients (dq, dk, dv) of FlashAttention by recomputation (chapter 07); three launches.

    q, k, v, o, do: (B, H, N, d); lse: (B, H, N) fp32 from :func:`flash_forward`.
    Blocks (BLOCK_M = Br, BLOCK_N = Bc: :mod:`flashsim.model.attention.visibility`): given ``block_m`` (Q rows)
    and ``block_n`` (K/V rows) hold for every launch, as the kernel view in
    :mod:`flashsim.model.kernel_io` assumes. Without them, on a Hopper GPU each kernel takes its own tuned
    configuration (:data:`flashsim.kernels._common.TUNED_H200`: the K/V pass wants few Q rows per step, the dQ
    pass many). ``tma``: stream the tiles through tensor descriptors (chapter 12); None = as
    :func:`flash_forward` decides (where supported and validated, never by default in the interpreter).
    ``gluon``: True: the FA3-style Gluon backward (:mod:`flashsim.kernels.gluon.bwd_sm90`; Hopper, fp16 or bf16,
    d in {64, 128}) computes dq, dk, dv (delta in its own prologue, not the preprocess kernel below), or an error
    says why it cannot; None (default): the same where :func:`flashsim.kernels.gluon.backward_path` with
    ``default=True`` picks it (no launch parameter given, and the shapes where it was measured faster than these
    kernels, :data:`flashsim.kernels.gluon.BWD_DEFAULT_FROM_N`), else these Triton kernels; False: always these.
    """
    B, H, N, d = check_qkv(q, k, v)
    check_tensors(("q", "o", "do"), q, o, do, ndim=4)
    if o.shape != q.shape or do.shape != q.shape:
        raise FlashsimError(f"o {tuple(o.shape)} and do {tuple(do.shape)} must have q's shape {tuple(q.shape)}")
    if not isinstance(lse, torch.Tensor) or tuple(lse.shape) != (B, H, N) or lse.dtype != torch.float32:
        raise FlashsimError(f"lse must be the fp32 (B, H, N) = {(B, H, N)} logsumexp flash_forward returned")
    causal = check_flag("causal", causal)
    scale = scale_of(sm_scale, d)
    gluon = None if gluon is None else check_flag("gluon", gluon)
    use_gluon = False
    if gluon or (gluon is None and not interpreting() and block_m is None and block_n is None
                 and num_warps is None and num_stages is None and tma is None):
        path, why = backward_path(q, k, v, causal, default=not gluon)
        use_gluon = path == "gluon"
        if gluon and not use_gluon:
            raise FlashsimError(f"gluon=True: {why}; or pass gluon=False for the Triton kernels")
    num_warps, num_stages = check_launch(num_warps, num_stages)
    block_d = head_block(d)
    q, k, v, o, do = (t.contiguous() for t in (q, k, v, o, do))     # one (B, H, N, d) layout for all
    lse = lse.contiguous()
    explicit = block_m is not None or block_n is not None
    block_m, block_n = check_blocks("flash_bwd", d, block_m, block_n)
    extra = {}
    if num_warps is not None or block_d >= 128:
        extra["num_warps"] = num_warps or 8
    if num_stages is not None:
        extra["num_stages"] = num_stages

    with_tma = use_tma(tma, (q, k, v, do), d, block_d)

    def launch(kernel: str) -> tuple[int, int, dict, bool]:
        """(BLOCK_M, BLOCK_N, launch options, TMA) of one kernel: the caller's, else the tuned ones (Hopper),
        with pointer loads where the sweeps found them faster (:data:`_common.POINTER_LOADS_H200`)."""
        tuned = None if explicit else tuned_config(kernel, block_d, causal)
        if tuned is None:
            return block_m, block_n, extra, with_tma
        tma_here = with_tma and (tma is True or (kernel, block_d, causal) not in POINTER_LOADS_H200)
        return (tuned[0], tuned[1], {"num_warps": num_warps or tuned[2], "num_stages": num_stages or tuned[3]},
                tma_here)

    if use_gluon:
        # its prologue computes delta in the launch that zeroes its dQ accumulator (flashsim.kernels.gluon.bwd_host)
        return gluon_backward(q, k, v, o, lse, do, None, causal=causal, sm_scale=scale)
    delta = output_like(q, (B, H, N), torch.float32)                 # (B, H, N)
    _bwd_preprocess[(triton.cdiv(N, block_m), B * H)](o, do, delta, *o.stride(), *do.stride(), H, N, d,
                                                      BLOCK_M=block_m, BLOCK_D=block_d)
    dk, dv, dq = output_like(k), output_like(v), output_like(q)      # (B, H, N, d) each
    bm, bn, opts, tma_here = launch("flash_bwd_dkdv")
    descs = (tensor_desc(q, bm, block_d), tensor_desc(do, bm, block_d)) if tma_here else (None, None)
    _bwd_dkdv[(triton.cdiv(N, bn), B * H)](q, k, v, do, dk, dv, lse, delta, scale, *descs, *q.stride(), H, N, d,
                                           CAUSAL=causal, USE_TMA=tma_here, BLOCK_M=bm, BLOCK_N=bn,
                                           BLOCK_D=block_d, **opts)
    bm, bn, opts, tma_here = launch("flash_bwd_dq")
    descs = (tensor_desc(k, bn, block_d), tensor_desc(v, bn, block_d)) if tma_here else (None, None)
    _bwd_dq[(triton.cdiv(N, bm), B * H)](q, k, v, do, dq, lse, delta, scale, *descs, *q.stride(), H, N, d,
                                         CAUSAL=causal, USE_TMA=tma_here, BLOCK_M=bm, BLOCK_N=bn,
                                         BLOCK_D=block_d, **opts)
    return dq, dk, dv
