"""Experimental forward variants timed by ``benchmarks/experiments/tune_experiments.py --kernels fwd,fwdx --spec ...``
(not in the package: none was faster on an H200): the package forward's math in a TMA-only kernel with knobs the
package kernel does not have. Its online-softmax step is its own copy; masked scores get -1e6, where the package
kernel uses -inf (equal results: exp2 of either is 0 next to a finite row max).

  ws       ``tl.range(..., warp_specialize=True)`` on the K/V loop: Triton's automatic warp specialization (a
           producer warp group issuing the TMA copies, consumer warp groups doing the math). On sm_90 it is known
           to compile only for single-loop, descriptor-based loops (triton-lang/triton#9728), hence:
  oneloop  one K/V loop per program. Causal: the mask is applied to every tile (an add and a select per score)
           instead of only the diagonal tiles; the package's two loops skip it left of the diagonal.
  preqk    the next tile's scores multiplied before this tile's softmax (FA3's intra-warpgroup overlap)
  persist  a persistent grid (persist x SMs programs, each looping over tiles; causal tiles longest first).
  flatten  with persist: ``tl.range(..., flatten=True)`` on the tile loop, so that the software pipeliner can
           prefetch the next tile's K/V while this tile finishes (one inner loop needed: use with oneloop).

Every variant computes exactly what ``flash_forward`` computes (checked against it before timing).
"""
from __future__ import annotations

from flashsim.kernels.runtime import select_backend

select_backend()          # GPU or interpreter, chosen before triton is imported (Triton reads it then)

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from flashsim.kernels._common import LN2, LOG2E  # noqa: E402


@triton.jit
def _softmax_step(acc, l_i, m_i, qk, offs_m, cols, N, qk_scale, MASK: tl.constexpr, CAUSAL: tl.constexpr,
                  EVEN_N: tl.constexpr):
    """One online-softmax step on a (BLOCK_M, BLOCK_N) score tile, as flash_forward's: returns (p, acc rescaled,
    l_i, m_new). MASK: scores of keys past N (unless EVEN_N) or after the query (causal) get -1e6."""
    if MASK:
        if CAUSAL:
            keep = offs_m[:, None] >= cols[None, :]
            if not EVEN_N:
                keep = keep & (cols < N)[None, :]
        else:
            keep = (cols < N)[None, :]
        qk = qk * qk_scale + tl.where(keep, 0.0, -1.0e6)
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        qk = qk - m_new[:, None]
    else:
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        qk = qk * qk_scale - m_new[:, None]
    p = tl.math.exp2(qk)
    alpha = tl.math.exp2(m_i - m_new)
    return p, acc * alpha[:, None], l_i * alpha + tl.sum(p, 1), m_new


@triton.jit
def _kv_loop(acc, l_i, m_i, q, desc_k, desc_v, b, h, offs_m, offs_n, N, qk_scale, lo, hi,
             MASK: tl.constexpr, CAUSAL: tl.constexpr, EVEN_N: tl.constexpr, WS: tl.constexpr,
             BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WS):
        k = desc_k.load([b, h, start_n, 0]).reshape(BLOCK_N, BLOCK_D)      # (BLOCK_N, BLOCK_D)
        qk = tl.dot(q, k.T)                                                # (BLOCK_M, BLOCK_N)
        p, acc, l_i, m_i = _softmax_step(acc, l_i, m_i, qk, offs_m, start_n + offs_n, N, qk_scale, MASK, CAUSAL,
                                         EVEN_N)
        v = desc_v.load([b, h, start_n, 0]).reshape(BLOCK_N, BLOCK_D)      # (BLOCK_N, BLOCK_D)
        acc = tl.dot(p.to(v.dtype), v, acc)
    return acc, l_i, m_i


@triton.jit
def _kv_loop_preqk(acc, l_i, m_i, q, desc_k, desc_v, b, h, offs_m, offs_n, N, qk_scale, lo, hi,
                   MASK: tl.constexpr, CAUSAL: tl.constexpr, EVEN_N: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_D: tl.constexpr):
    """FA3's intra-warpgroup overlap, written out: the scores of tile j+1 are multiplied (async wgmma) before
    tile j's softmax runs, so the tensor cores and the exponentials can work at the same time. Costs a second
    score tile in registers and one K tile loaded past the loop's end (zeros past N)."""
    k = desc_k.load([b, h, lo, 0]).reshape(BLOCK_N, BLOCK_D)
    qk = tl.dot(q, k.T)                                                    # scores of the first tile
    for start_n in tl.range(lo, hi, BLOCK_N):
        k_next = desc_k.load([b, h, start_n + BLOCK_N, 0]).reshape(BLOCK_N, BLOCK_D)
        qk_next = tl.dot(q, k_next.T)                                      # next tile's scores, in flight ...
        p, acc, l_i, m_i = _softmax_step(acc, l_i, m_i, qk, offs_m, start_n + offs_n, N, qk_scale, MASK, CAUSAL,
                                         EVEN_N)                          # ... while this tile's softmax runs
        v = desc_v.load([b, h, start_n, 0]).reshape(BLOCK_N, BLOCK_D)
        acc = tl.dot(p.to(v.dtype), v, acc)
        qk = qk_next
    return acc, l_i, m_i


@triton.jit
def _tile(desc_q, desc_k, desc_v, desc_o, LSE, qk_scale, pid_m, pid_bh, H, N, CAUSAL: tl.constexpr,
          EVEN_N: tl.constexpr, WS: tl.constexpr, ONELOOP: tl.constexpr, PREQK: tl.constexpr,
          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    b = pid_bh // H
    h = pid_bh % H
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    q = desc_q.load([b, h, pid_m * BLOCK_M, 0]).reshape(BLOCK_M, BLOCK_D)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
    if CAUSAL:
        hi = tl.minimum((pid_m + 1) * BLOCK_M, N)
    else:
        hi = N
    if PREQK and ONELOOP:
        acc, l_i, m_i = _kv_loop_preqk(acc, l_i, m_i, q, desc_k, desc_v, b, h, offs_m, offs_n, N, qk_scale, 0, hi,
                                       CAUSAL or not EVEN_N, CAUSAL, EVEN_N, BLOCK_N, BLOCK_D)
    elif PREQK:
        if CAUSAL:
            lo = (pid_m * BLOCK_M) // BLOCK_N * BLOCK_N
        else:
            lo = N // BLOCK_N * BLOCK_N
        acc, l_i, m_i = _kv_loop_preqk(acc, l_i, m_i, q, desc_k, desc_v, b, h, offs_m, offs_n, N, qk_scale, 0, lo,
                                       False, CAUSAL, EVEN_N, BLOCK_N, BLOCK_D)
        acc, l_i, m_i = _kv_loop(acc, l_i, m_i, q, desc_k, desc_v, b, h, offs_m, offs_n, N, qk_scale, lo, hi,
                                 True, CAUSAL, EVEN_N, WS, BLOCK_N, BLOCK_D)
    elif ONELOOP:
        acc, l_i, m_i = _kv_loop(acc, l_i, m_i, q, desc_k, desc_v, b, h, offs_m, offs_n, N, qk_scale, 0, hi,
                                 CAUSAL or not EVEN_N, CAUSAL, EVEN_N, WS, BLOCK_N, BLOCK_D)
    else:
        if CAUSAL:
            lo = (pid_m * BLOCK_M) // BLOCK_N * BLOCK_N
        else:
            lo = N // BLOCK_N * BLOCK_N
        acc, l_i, m_i = _kv_loop(acc, l_i, m_i, q, desc_k, desc_v, b, h, offs_m, offs_n, N, qk_scale, 0, lo,
                                 False, CAUSAL, EVEN_N, WS, BLOCK_N, BLOCK_D)
        acc, l_i, m_i = _kv_loop(acc, l_i, m_i, q, desc_k, desc_v, b, h, offs_m, offs_n, N, qk_scale, lo, hi,
                                 True, CAUSAL, EVEN_N, WS, BLOCK_N, BLOCK_D)
    acc = acc / l_i[:, None]
    desc_o.store([b, h, pid_m * BLOCK_M, 0], acc.to(desc_o.dtype).reshape(1, 1, BLOCK_M, BLOCK_D))
    tl.store(LSE + pid_bh * N + offs_m, (m_i + tl.math.log2(l_i)) * LN2, mask=offs_m < N)


@triton.jit
def _fwdx_grid(desc_q, desc_k, desc_v, desc_o, LSE, sm_scale, H, N, CAUSAL: tl.constexpr, EVEN_N: tl.constexpr,
               WS: tl.constexpr, ONELOOP: tl.constexpr, PREQK: tl.constexpr, BLOCK_M: tl.constexpr,
               BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    pid_m = tl.program_id(0)
    if CAUSAL:
        pid_m = tl.num_programs(0) - 1 - pid_m
    _tile(desc_q, desc_k, desc_v, desc_o, LSE, sm_scale * LOG2E, pid_m, tl.program_id(1), H, N,
          CAUSAL, EVEN_N, WS, ONELOOP, PREQK, BLOCK_M, BLOCK_N, BLOCK_D)


@triton.jit
def _fwdx_persistent(desc_q, desc_k, desc_v, desc_o, LSE, sm_scale, H, N, n_m, total, CAUSAL: tl.constexpr,
                     EVEN_N: tl.constexpr, WS: tl.constexpr, ONELOOP: tl.constexpr, PREQK: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                     FLATTEN: tl.constexpr):
    # tile t: row block t % n_m of head t // n_m (neighbouring programs share a head's K/V in L2);
    # causal: row blocks in reverse, so each head's longest rows go first
    for t in tl.range(tl.program_id(0), total, tl.num_programs(0), flatten=FLATTEN):
        pid_m = t % n_m
        if CAUSAL:
            pid_m = n_m - 1 - pid_m
        _tile(desc_q, desc_k, desc_v, desc_o, LSE, sm_scale * LOG2E, pid_m, t // n_m, H, N,
              CAUSAL, EVEN_N, WS, ONELOOP, PREQK, BLOCK_M, BLOCK_N, BLOCK_D)


def launch(c, q, k, v, o, lse, scale, desc, sms=132):
    """A zero-argument launch of variant c (keys bm, bn, w, s, ws, oneloop, preqk, persist, flatten) writing o
    and lse."""
    B, H, n, d = q.shape
    bm, bn = c["bm"], c["bn"]
    descs = (desc(q, bm), desc(k, bn), desc(v, bn), desc(o, bm))
    flags = dict(CAUSAL=c["causal"], EVEN_N=n % bn == 0 and n % bm == 0, WS=bool(c.get("ws")),
                 ONELOOP=bool(c.get("oneloop")), PREQK=bool(c.get("preqk")), BLOCK_M=bm, BLOCK_N=bn, BLOCK_D=d,
                 num_warps=c["w"], num_stages=c["s"])
    n_m = triton.cdiv(n, bm)
    if c.get("persist"):
        grid = (min(n_m * B * H, c["persist"] * sms),)
        return lambda: _fwdx_persistent[grid](*descs, lse, scale, H, n, n_m, n_m * B * H,
                                              FLATTEN=bool(c.get("flatten")), **flags)
    return lambda: _fwdx_grid[(n_m, B * H)](*descs, lse, scale, H, n, **flags)
