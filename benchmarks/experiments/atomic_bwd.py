"""Experiment: FlashAttention-2's own backward, dQ by fp32 atomic adds from the dK/dV pass (not in the package).

The package's backward (:func:`flashsim.kernels.flash_backward`, chapter 07) computes dQ in a pass of its own, so no
two programs ever write the same element. FA2's backward instead lets the K/V pass also compute each Q row block's
share dS K · scale (5 matmuls per (Q block, K/V block) pair instead of 7) and add it into a zeroed fp32 (B, H, N, d)
buffer with ``tl.atomic_add``, once per K/V row block that sees the rows; the wrapper casts the sum to the input
dtype. The order of the adds differs from run to run on a GPU, so dQ is not bit-for-bit reproducible there (it is
in the interpreter, which runs programs one after another). Keys past N must then get dS = 0 (they would add to
dQ), so a ragged last K/V block masks every tile.

Measured slower than the package's backward on an H200 at every shape
(``benchmarks/experiments/results/atomic_bwd_h200_2026-11-30.json``), so the package keeps one backward path.
This file keeps the experiment runnable: the kernel below is a copy of the package's K/V pass with the atomic dQ,
and runs in the Triton interpreter too (``tests/benchmarks/test_atomic_bwd.py``).

    PYTHONPATH=$PWD python benchmarks/experiments/atomic_bwd.py --out benchmarks/experiments/results   # a GPU
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from flashsim.kernels.runtime import select_backend  # noqa: E402

select_backend()          # GPU or interpreter, chosen before triton is imported (Triton reads it then)

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from flashsim.errors import FlashsimError  # noqa: E402
from flashsim.kernels import flash_backward, flash_forward  # noqa: E402
from flashsim.kernels._common import (LOG2E, check_blocks, check_flag, check_launch, check_qkv,  # noqa: E402
                                      check_tensors, head_block, output_like, scale_of, tensor_desc, use_tma)
from flashsim.kernels.flash_bwd import _bwd_preprocess  # noqa: E402
from flashsim.measure import bench  # noqa: E402
from flashsim.measure.provenance import run_info  # noqa: E402
from flashsim.model.attention.reference import reference_attention_grads  # noqa: E402


@triton.jit
def _dkdv_atomic_tiles(dk, dv, k, v, Q, DO, DQ, LSE, DELTA, qk_scale, sm_scale, base, pid_bh, stride_n, stride_d,
                desc_q, desc_do, b, h, offs_n, offs_m, offs_d, d_valid, N, lo, hi,
                MASK: tl.constexpr, CAUSAL: tl.constexpr, USE_TMA: tl.constexpr,
                       BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    """Stream Q/dO row blocks [lo, hi) past one K/V tile. MASK=False where every query row of the block is
    below the diagonal and inside N: no masking arithmetic there (the FA2 trick). USE_TMA: Q and dO tiles come
    through tensor descriptors (chapter 12); rows past N arrive as 0, as the masked pointer loads give them.
    Also adds each row block's dQ share into the fp32 buffer DQ with atomic adds."""
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
        pT = tl.math.exp2(qkT * qk_scale - lse[None, :] * LOG2E)                 # recomputed P tileᵀ (exp2)
        if MASK:
            keep = m_valid[None, :]
            keep = keep & (offs_n < N)[:, None]           # keys past N: their dS must be 0, it goes into dQ
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
        dq = tl.dot(tl.trans(dsT.to(k.dtype)), k) * sm_scale              # (BLOCK_M, BLOCK_D) this block's share
        # sem="relaxed": no ordering between programs is needed, only the sum (the launch's end publishes it).
        # reads and writes dQ (fp32, read-modify-write in L2) once per K/V row block: N*d fp32 per row block
        tl.atomic_add(DQ + q_off, dq, mask=q_mask, sem="relaxed")
    return dk, dv


@triton.jit
def _bwd_dkdv_atomic(Q, K, V, DO, DK, DV, LSE, DELTA, sm_scale, DESC_Q, DESC_DO, DQ,
              stride_b, stride_h, stride_n, stride_d,
              H, N, D,
              CAUSAL: tl.constexpr, USE_TMA: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
              BLOCK_D: tl.constexpr):
    # Q, K, V, dO, dK, dV and DQ (fp32) share one (B, H, N, d) layout: the wrapper makes them contiguous.
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
    whole = N // BLOCK_M * BLOCK_M                   # whole row blocks end here; a ragged last one follows ...
    # ... except in a ragged last K/V block, whose keys past N need the mask on every tile (they would add to dQ)
    whole = whole * ((pid_n + 1) * BLOCK_N <= N).to(tl.int32)
    full = tl.maximum(mid, whole)
    # [lo, mid): blocks on the diagonal, masked; [mid, full): below it, unmasked; [full, N): ragged, masked
    qk_scale = sm_scale * LOG2E                       # exp(x) = exp2(x * log2(e)): fold log2(e) into the scale
    dk, dv = _dkdv_atomic_tiles(dk, dv, k, v, Q, DO, DQ, LSE, DELTA, qk_scale, sm_scale, base, pid_bh, stride_n, stride_d,
                         DESC_Q, DESC_DO, b, h, offs_n, offs_m, offs_d, d_valid, N, lo, mid,
                         MASK=True, CAUSAL=CAUSAL, USE_TMA=USE_TMA, BLOCK_M=BLOCK_M,
                         BLOCK_D=BLOCK_D)
    dk, dv = _dkdv_atomic_tiles(dk, dv, k, v, Q, DO, DQ, LSE, DELTA, qk_scale, sm_scale, base, pid_bh, stride_n, stride_d,
                         DESC_Q, DESC_DO, b, h, offs_n, offs_m, offs_d, d_valid, N, mid, full,
                         MASK=False, CAUSAL=CAUSAL, USE_TMA=USE_TMA, BLOCK_M=BLOCK_M,
                         BLOCK_D=BLOCK_D)
    dk, dv = _dkdv_atomic_tiles(dk, dv, k, v, Q, DO, DQ, LSE, DELTA, qk_scale, sm_scale, base, pid_bh, stride_n, stride_d,
                         DESC_Q, DESC_DO, b, h, offs_n, offs_m, offs_d, d_valid, N, full, N,
                         MASK=True, CAUSAL=CAUSAL, USE_TMA=USE_TMA, BLOCK_M=BLOCK_M,
                         BLOCK_D=BLOCK_D)
    dk = dk * sm_scale
    # writes dK once: N*d elements per head
    tl.store(DK + kv_off, dk.to(DK.dtype.element_ty), mask=kv_mask)
    # writes dV once: N*d elements per head
    tl.store(DV + kv_off, dv.to(DV.dtype.element_ty), mask=kv_mask)


def flash_backward_atomic(q, k, v, o, lse, do, causal: bool = False, sm_scale=None, block_m: int | None = None,
                          block_n: int | None = None, num_warps: int | None = None, num_stages: int | None = None,
                          tma: bool | None = None):
    """(dq, dk, dv) like :func:`flashsim.kernels.flash_backward`, in two launches: the package's delta
    preprocess, then the K/V pass with the atomic dQ above. Same arguments; ``block_m``/``block_n`` hold for both."""
    B, H, N, d = check_qkv(q, k, v)
    check_tensors(("q", "o", "do"), q, o, do, ndim=4)
    if o.shape != q.shape or do.shape != q.shape or tuple(lse.shape) != (B, H, N):
        raise FlashsimError("o and do must have q's shape and lse (B, H, N): as flash_forward returns them")
    causal = check_flag("causal", causal)
    scale = scale_of(sm_scale, d)
    num_warps, num_stages = check_launch(num_warps, num_stages)
    block_d = head_block(d)
    q, k, v, o, do = (t.contiguous() for t in (q, k, v, o, do))
    lse = lse.contiguous()
    block_m, block_n = check_blocks("flash_bwd", d, block_m, block_n)
    opts = {}
    if num_warps is not None or block_d >= 128:
        opts["num_warps"] = num_warps or 8
    if num_stages is not None:
        opts["num_stages"] = num_stages
    with_tma = use_tma(tma, (q, k, v, do), d, block_d)
    delta = output_like(q, (B, H, N), torch.float32)                 # (B, H, N)
    _bwd_preprocess[(triton.cdiv(N, block_m), B * H)](o, do, delta, *o.stride(), *do.stride(), H, N, d,
                                                      BLOCK_M=block_m, BLOCK_D=block_d)
    dk, dv = output_like(k), output_like(v)                           # (B, H, N, d) each
    dq = torch.zeros(q.shape, dtype=torch.float32, device=q.device)  # the atomic adds need a zeroed fp32 sum
    descs = (tensor_desc(q, block_m, block_d), tensor_desc(do, block_m, block_d)) if with_tma else (None, None)
    _bwd_dkdv_atomic[(triton.cdiv(N, block_n), B * H)](q, k, v, do, dk, dv, lse, delta, scale, *descs, dq,
                                                       *q.stride(), H, N, d, CAUSAL=causal, USE_TMA=with_tma,
                                                       BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=block_d, **opts)
    return dq.to(q.dtype), dk, dv


def main(argv=None) -> dict:
    """Time the atomic backward against the package's on a GPU (fp16, the speed grid's shapes), check both
    against float64, and write ``atomic_bwd_<gpu>_<date>.json`` under ``--out``."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "benchmarks", "experiments", "results"))
    ap.add_argument("--n", default="1024,4096,16384")
    args = ap.parse_args(argv)
    device = "cpu" if select_backend().interpreter else "cuda"
    rows = []
    for d in (64, 128):
        for causal in (False, True):
            for n in (int(x) for x in args.n.split(",")):
                B, H = max(1, 16384 // n), 2048 // d
                torch.manual_seed(n + d + causal)
                q, k, v, do = (torch.randn(B, H, n, d, device=device, dtype=torch.float16) for _ in range(4))
                o, lse = flash_forward(q, k, v, causal=causal)
                ref = reference_attention_grads(*(x[0, :1].double().cpu().numpy() for x in (q, k, v, do)),
                                                causal=causal)
                ours = flash_backward_atomic(q, k, v, o, lse, do, causal=causal)
                err = max(float(((g[0, :1].double().cpu() - torch.from_numpy(r)).norm() / torch.from_numpy(r).norm()))
                          for g, r in zip(ours, ref))
                rows.append(dict(d=d, causal=causal, n=n, batch=B, heads=H, err_vs_float64=err,
                                 atomic_ms=bench(lambda: flash_backward_atomic(q, k, v, o, lse, do, causal=causal)),
                                 separate_ms=bench(lambda: flash_backward(q, k, v, o, lse, do, causal=causal,
                                                                          gluon=False))))
                print(json.dumps(rows[-1]), flush=True)
    info = run_info(" ".join(["python"] + sys.argv))
    gpu = torch.cuda.get_device_name(0).split()[-1].lower() if device == "cuda" else "cpu"
    path = os.path.join(args.out, f"atomic_bwd_{gpu}_{time.strftime('%Y-%m-%d', time.gmtime())}.json")
    os.makedirs(args.out, exist_ok=True)
    with open(path, "w") as f:
        json.dump(dict(info=info, rows=rows), f, indent=1)
    print("wrote", path)
    return dict(info=info, rows=rows)


if __name__ == "__main__":
    main()
