"""FlashAttention-2 backward with dQ by atomic adds, in one pass over K/V blocks (chapter 07, opt-in).

:func:`flashsim.kernels.flash_backward` with ``dq_mode="atomic"`` runs this after the same ``_bwd_preprocess``
(delta_i = sum_j dO_ij * O_ij). Where the default ``dq_mode="separate"`` then launches a dK/dV kernel and a
separate dQ kernel (which recomputes P and dP a second time: 7 matmuls per (Q block, K/V block) pair), this
kernel does what FlashAttention-2's own backward does: one program per (K/V row block, batch*head) loads its K
and V tiles once, streams every visible Q row block past them (causal: from the diagonal down; fully masked
tiles are skipped) and, per tile pair, with 5 matmuls:

    Sᵀ  = K Qᵀ · scale            Pᵀ = exp(Sᵀ − L)          (recomputed from the saved logsumexp L)
    dV += Pᵀ dO                   dPᵀ = V dOᵀ               dSᵀ = Pᵀ ∘ (dPᵀ − delta)
    dK += dSᵀ Q                   dQ[Q block] += dS K · scale   (tl.atomic_add into an fp32 buffer)

dK and dV stay in registers and are written once. dQ's rows receive one contribution from every K/V block that
sees them, from different programs running at the same time, so they are summed with fp32 atomic adds into a
zeroed (B, H, N, d) buffer, which the wrapper then casts to the input dtype (a torch op, outside the kernel).
The order of the adds differs from run to run on a GPU, so dQ is not bit-for-bit reproducible there (it is in
the interpreter, which runs programs one after another).

Traffic per (batch, head) (the kernel view in :mod:`flashsim.kernel_io`, ``dq_mode="atomic"``, adds it up):
K, V read once; Q, dO, L, delta read once per K/V row block (causal: from the diagonal down); dK, dV written
once; dQ: each atomic add reads and writes its fp32 elements in L2 (read-modify-write), once per K/V row block.
Masking runs only on tiles on the diagonal (causal), on a ragged last Q block, and in the program of a ragged
last K/V block; every other tile skips the masking arithmetic.
"""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _atomic_tiles(dk, dv, k, v, Q, DO, DQ, LSE, DELTA, sm_scale, base, pid_bh, stride_n, stride_d,
                  offs_n, offs_m, offs_d, d_valid, N, lo, hi,
                  MASK: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr):
    """Stream Q/dO row blocks [lo, hi) past one K/V tile; add each block's dQ share atomically.

    MASK=False where every query row of the block is inside N and sees every key of the tile."""
    n_valid = offs_n < N
    for start_m in range(lo, hi, BLOCK_M):
        rows = start_m + offs_m
        m_valid = rows < N
        q_mask = m_valid[:, None] & d_valid[None, :]
        q_off = base + rows[:, None] * stride_n + offs_d[None, :] * stride_d
        # reads Q once per K/V row block: N*d elements per row block (causal: from the diagonal down)
        q = tl.load(Q + q_off, mask=q_mask, other=0.0)                   # (BLOCK_M, BLOCK_D)
        # reads L once per K/V row block: N fp32 per row block
        lse = tl.load(LSE + pid_bh * N + rows, mask=m_valid, other=0.0)  # (BLOCK_M,)
        qkT = tl.dot(k, tl.trans(q)) * sm_scale                          # (BLOCK_N, BLOCK_M) = S tileᵀ
        pT = tl.exp(qkT - lse[None, :])                                  # recomputed P tileᵀ
        if MASK:
            keep = m_valid[None, :] & n_valid[:, None]     # key rows past N too: their dS must be 0 for dQ
            if CAUSAL:
                keep = keep & (rows[None, :] >= offs_n[:, None])
            pT = tl.where(keep, pT, 0.0)
        # reads dO once per K/V row block: N*d elements per row block
        do = tl.load(DO + q_off, mask=q_mask, other=0.0)                 # (BLOCK_M, BLOCK_D)
        dv += tl.dot(pT.to(do.dtype), do)
        # reads delta once per K/V row block: N fp32 per row block
        delta = tl.load(DELTA + pid_bh * N + rows, mask=m_valid, other=0.0)  # (BLOCK_M,)
        dpT = tl.dot(v, tl.trans(do))                                    # (BLOCK_N, BLOCK_M) = dP tileᵀ
        dsT = pT * (dpT - delta[None, :])
        dk += tl.dot(dsT.to(q.dtype), q)
        dq = tl.dot(tl.trans(dsT.to(k.dtype)), k) * sm_scale              # (BLOCK_M, BLOCK_D) this block's share
        # sem="relaxed": no ordering between programs is needed, only the sum (the launch's end publishes it).
        # reads and writes dQ (fp32, read-modify-write in L2) once per K/V row block: N*d fp32 per row block
        tl.atomic_add(DQ + q_off, dq, mask=q_mask, sem="relaxed")
    return dk, dv


@triton.jit
def _bwd_dkdv_dq_atomic(Q, K, V, DO, DQ, DK, DV, LSE, DELTA, sm_scale,
                        stride_b, stride_h, stride_n, stride_d,
                        H, N, D,
                        CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        BLOCK_D: tl.constexpr):
    # Q, K, V, dO, dQ (fp32), dK, dV share one (B, H, N, d) layout: the wrapper makes them contiguous.
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
    k = tl.load(K + kv_off, mask=kv_mask, other=0.0)                    # (BLOCK_N, BLOCK_D)
    # reads V once: N*d elements per head
    v = tl.load(V + kv_off, mask=kv_mask, other=0.0)                    # (BLOCK_N, BLOCK_D)
    dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)

    if CAUSAL:
        lo = (pid_n * BLOCK_N // BLOCK_M) * BLOCK_M   # Q row blocks wholly above the diagonal are skipped
        mid = tl.minimum(tl.cdiv((pid_n + 1) * BLOCK_N, BLOCK_M) * BLOCK_M, N)   # end of the diagonal blocks
    else:
        lo = 0
        mid = 0
    kv_whole = ((pid_n + 1) * BLOCK_N <= N).to(tl.int32)    # 0 for a ragged last K/V block (keys past N) ...
    full = tl.maximum(mid, N // BLOCK_M * BLOCK_M * kv_whole)   # ... which masks every tile: full = mid
    # otherwise whole row blocks end at `full`; a ragged last one follows
    # [lo, mid): blocks on the diagonal, masked; [mid, full): below it, unmasked; [full, N): ragged, masked
    dk, dv = _atomic_tiles(dk, dv, k, v, Q, DO, DQ, LSE, DELTA, sm_scale, base, pid_bh, stride_n, stride_d,
                           offs_n, offs_m, offs_d, d_valid, N, lo, mid, MASK=True, CAUSAL=CAUSAL, BLOCK_M=BLOCK_M)
    dk, dv = _atomic_tiles(dk, dv, k, v, Q, DO, DQ, LSE, DELTA, sm_scale, base, pid_bh, stride_n, stride_d,
                           offs_n, offs_m, offs_d, d_valid, N, mid, full, MASK=False, CAUSAL=CAUSAL,
                           BLOCK_M=BLOCK_M)
    dk, dv = _atomic_tiles(dk, dv, k, v, Q, DO, DQ, LSE, DELTA, sm_scale, base, pid_bh, stride_n, stride_d,
                           offs_n, offs_m, offs_d, d_valid, N, full, N, MASK=True, CAUSAL=CAUSAL, BLOCK_M=BLOCK_M)
    dk = dk * sm_scale
    # writes dK once: N*d elements per head
    tl.store(DK + kv_off, dk.to(DK.dtype.element_ty), mask=kv_mask)
    # writes dV once: N*d elements per head
    tl.store(DV + kv_off, dv.to(DV.dtype.element_ty), mask=kv_mask)


def launch_dkdv_dq_atomic(q, k, v, do, dq32, dk, dv, lse, delta, scale, causal, block_m, block_n, block_d,
                          **extra):
    """Launch the one-pass kernel: grid (K/V row blocks, B*H). ``dq32`` must be a zeroed fp32 (B, H, N, d)."""
    B, H, N, d = q.shape
    _bwd_dkdv_dq_atomic[(triton.cdiv(N, block_n), B * H)](q, k, v, do, dq32, dk, dv, lse, delta, scale,
                                                          *q.stride(), H, N, d, CAUSAL=bool(causal),
                                                          BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=block_d,
                                                          **extra)
