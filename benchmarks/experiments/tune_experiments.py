"""Experiments timed with the tuning sweep's machinery (``benchmarks/tune_attention.py``), not in the package.

    PYTHONPATH=$PWD python benchmarks/experiments/tune_experiments.py --out benchmarks/experiments/results \
        --n 4096 [--kernels fwd,fwd_pp] [--spec ...]

Kernels registered here (each checked against the package's outputs before it is timed):
  fwd_pp  two Q half-tiles per program updated alternately: a manual "ping-pong" (below), TMA
  fwdx    benchmarks/experiments/fwd_variants.py: the forward with warp specialization (``ws``), one loop
          (``oneloop``), the next tile's QK before this tile's softmax (``preqk``), a persistent grid
          (``persist<k>``) and a flattened tile loop (``flatten``), TMA
  atomic  benchmarks/experiments/atomic_bwd.py: the K/V pass with dQ by fp32 atomic adds (FA2's backward)
Without ``--spec`` the grid is the ping-pong sweep (ping-pong configurations next to the package forward's).
The results of earlier runs are in ``benchmarks/experiments/results/`` (tune_h200_2026-11-30_{pingpong,fwdx,preqk,
flatten}_n*.json, atomic_bwd_h200_2026-11-30.json): none beat the package's kernels on an H200.
"""
from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from benchmarks import tune_attention as T  # noqa: E402  (chooses GPU or interpreter before triton is imported)
from benchmarks.experiments import atomic_bwd  # noqa: E402
from benchmarks.experiments.fwd_variants import _softmax_step, launch  # noqa: E402

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from flashsim.kernels._common import LN2, LOG2E, tensor_desc  # noqa: E402


# --- ping-pong: two Q half-tiles per program, updated alternately ------------------------------------------------
# FA3 overlaps one warpgroup's softmax with another's matrix multiplies. Triton 3.6 cannot warp-specialize on sm_90,
# but a program that holds two independent halves gives the scheduler the same freedom: the async MMA of one half
# can run while the other half's exponentials are computed. Measured: -4% to +3% of the package forward.

@triton.jit
def _pp_half(acc, l_i, m_i, qk, v, cols, offs_m, N, qk_scale, MASK: tl.constexpr, CAUSAL: tl.constexpr):
    p, acc, l_i, m_new = _softmax_step(acc, l_i, m_i, qk, offs_m, cols, N, qk_scale, MASK, CAUSAL, False)
    acc = tl.dot(p.to(v.dtype), v, acc)
    return acc, l_i, m_new


@triton.jit
def _pp_tiles(acc0, l0, m0, acc1, l1, m1, q0, q1, desc_k, desc_v, b, h, offs_m0, offs_m1, offs_n, N, qk_scale,
              lo, hi, MASK: tl.constexpr, CAUSAL: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    for start_n in range(lo, hi, BLOCK_N):
        k = desc_k.load([b, h, start_n, 0]).reshape(BLOCK_N, BLOCK_D)
        v = desc_v.load([b, h, start_n, 0]).reshape(BLOCK_N, BLOCK_D)
        cols = start_n + offs_n
        qk0 = tl.dot(q0, k.T)
        qk1 = tl.dot(q1, k.T)
        acc0, l0, m0 = _pp_half(acc0, l0, m0, qk0, v, cols, offs_m0, N, qk_scale, MASK, CAUSAL)
        acc1, l1, m1 = _pp_half(acc1, l1, m1, qk1, v, cols, offs_m1, N, qk_scale, MASK, CAUSAL)
    return acc0, l0, m0, acc1, l1, m1


@triton.jit
def _fwd_pingpong_kernel(DESC_Q, DESC_K, DESC_V, DESC_O, LSE, sm_scale, H, N, CAUSAL: tl.constexpr,
                         HALF: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    pid_m = tl.program_id(0)
    if CAUSAL:
        pid_m = tl.num_programs(0) - 1 - pid_m
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    start = pid_m * 2 * HALF
    offs_m0 = start + tl.arange(0, HALF)
    offs_m1 = offs_m0 + HALF
    offs_n = tl.arange(0, BLOCK_N)
    q0 = DESC_Q.load([b, h, start, 0]).reshape(HALF, BLOCK_D)
    q1 = DESC_Q.load([b, h, start + HALF, 0]).reshape(HALF, BLOCK_D)
    m0 = tl.full([HALF], float("-inf"), dtype=tl.float32)
    m1 = tl.full([HALF], float("-inf"), dtype=tl.float32)
    l0 = tl.zeros([HALF], dtype=tl.float32)
    l1 = tl.zeros([HALF], dtype=tl.float32)
    acc0 = tl.zeros([HALF, BLOCK_D], dtype=tl.float32)
    acc1 = tl.zeros([HALF, BLOCK_D], dtype=tl.float32)
    qk_scale = sm_scale * LOG2E
    if CAUSAL:
        lo = start // BLOCK_N * BLOCK_N
        hi = tl.minimum(start + 2 * HALF, N)
    else:
        lo = N // BLOCK_N * BLOCK_N
        hi = N
    acc0, l0, m0, acc1, l1, m1 = _pp_tiles(acc0, l0, m0, acc1, l1, m1, q0, q1, DESC_K, DESC_V, b, h, offs_m0,
                                           offs_m1, offs_n, N, qk_scale, 0, lo, False, CAUSAL, BLOCK_N, BLOCK_D)
    acc0, l0, m0, acc1, l1, m1 = _pp_tiles(acc0, l0, m0, acc1, l1, m1, q0, q1, DESC_K, DESC_V, b, h, offs_m0,
                                           offs_m1, offs_n, N, qk_scale, lo, hi, True, CAUSAL, BLOCK_N, BLOCK_D)
    DESC_O.store([b, h, start, 0], (acc0 / l0[:, None]).to(DESC_O.dtype).reshape(1, 1, HALF, BLOCK_D))
    DESC_O.store([b, h, start + HALF, 0], (acc1 / l1[:, None]).to(DESC_O.dtype).reshape(1, 1, HALF, BLOCK_D))
    tl.store(LSE + pid_bh * N + offs_m0, (m0 + tl.math.log2(l0)) * LN2, mask=offs_m0 < N)
    tl.store(LSE + pid_bh * N + offs_m1, (m1 + tl.math.log2(l1)) * LN2, mask=offs_m1 < N)


# --- launchers (tune_attention's convention: a zero-argument launch and a check against the package's outputs) ----

def _err(a, b):
    return float((a.float() - b.float()).norm() / b.float().norm())


def _launch_pingpong(c, x):
    import torch
    q, k, v, lse = x["q"], x["k"], x["v"], x["lse"]
    B, H, n, d = x["B"], x["H"], x["n"], x["d"]
    bm, bn = c["bm"], c["bn"]
    o, lse2 = torch.empty_like(q), torch.empty_like(lse)
    descs = (tensor_desc(q, bm // 2, d), tensor_desc(k, bn, d), tensor_desc(v, bn, d), tensor_desc(o, bm // 2, d))

    def run():
        return _fwd_pingpong_kernel[(triton.cdiv(n, bm), B * H)](*descs, lse2, d ** -0.5, H, n, CAUSAL=c["causal"],
                                                                 HALF=bm // 2, BLOCK_N=bn, BLOCK_D=d,
                                                                 num_warps=c["w"], num_stages=c["s"])
    return run, lambda: _err(o, x["o"])


def _launch_fwdx(c, x):
    import torch
    q, k, v, lse = x["q"], x["k"], x["v"], x["lse"]
    o, lse2 = torch.empty_like(q), torch.empty_like(lse)
    sms = torch.cuda.get_device_properties(q.device).multi_processor_count if q.is_cuda else 4
    run = launch(c, q, k, v, o, lse2, x["d"] ** -0.5, lambda t, rows: tensor_desc(t, rows, x["d"]), sms)
    return run, lambda: max(_err(o, x["o"]), _err(lse2, x["lse"]))


def _launch_atomic(c, x):
    import torch
    q, k, v, do, lse, delta = x["q"], x["k"], x["v"], x["do"], x["lse"], x["delta"]
    B, H, n, d = x["B"], x["H"], x["n"], x["d"]
    bm, bn, tma = c["bm"], c["bn"], c.get("tma", False)
    dk, dv = torch.empty_like(k), torch.empty_like(v)
    dq32 = torch.zeros(q.shape, device=q.device, dtype=torch.float32)
    descs = (tensor_desc(q, bm, d), tensor_desc(do, bm, d)) if tma else (None, None)

    def run():
        dq32.zero_()                          # part of the atomic variant's cost
        return atomic_bwd._bwd_dkdv_atomic[(triton.cdiv(n, bn), B * H)](
            q, k, v, do, dk, dv, lse, delta, d ** -0.5, *descs, dq32, *q.stride(), H, n, d, CAUSAL=c["causal"],
            USE_TMA=tma, BLOCK_M=bm, BLOCK_N=bn, BLOCK_D=d, num_warps=c["w"], num_stages=c["s"])
    return run, lambda: max(_err(dk, x["dk"]), _err(dv, x["dv"]), _err(dq32, x["dq"]))


#: the ping-pong sweep: (BLOCK_M = 2 halves, BLOCK_N, warps, stages, TMA), with the package forward's best next to it
PINGPONG_GRID = {
    "fwd_pp": [(2 * half, bn, w, st, True) for half, bn, w, st in (
        (64, 64, 4, 2), (64, 64, 8, 2), (64, 128, 4, 2), (64, 128, 8, 2), (64, 64, 4, 3), (64, 64, 8, 3),
        (64, 32, 4, 3), (128, 64, 8, 2), (32, 128, 4, 2))],
    "fwd": [(64, 128, 4, 2, True), (128, 64, 4, 2, True), (64, 64, 4, 3, True)],
}

T.EXPERIMENTS.update(launchers={"fwd_pp": _launch_pingpong, "fwdx": _launch_fwdx, "atomic": _launch_atomic},
                     flags=("ws", "oneloop", "preqk", "flatten", "persist"), configs={"pingpong": PINGPONG_GRID},
                     tma_only=("fwdx", "fwd_pp"), module=__name__)


def main(argv=None):
    return T.main(argv, experiment="pingpong")


if __name__ == "__main__":
    main()
