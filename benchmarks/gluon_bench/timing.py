"""Timing for benchmarks/gluon_validate.py: ``triton.testing.do_bench`` medians, with the Gluon kernels' NaN
poisoning off, in interleaved rounds (every kernel of a row once per round, in a fresh order), ratios per round;
FLOP counts; SDPA calls forced onto one backend."""
from __future__ import annotations

import os
import random
import statistics

def flops(B, H, N, d, causal):
    f = 4.0 * B * H * N * N * d
    return f / 2 if causal else f


def bench(fn, warmup, rep):
    import triton
    return triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median")


def bench_unpoisoned(fn, warmup, rep):
    """``bench`` with FLASHSIM_POISON off: the correctness checks fill the Gluon kernels' outputs with NaN before
    each launch (so that an unwritten element shows), which costs extra fill kernels (o and lse, or dk and dv) that
    no user's call runs; times are taken without them (runs up to 2026-12-02 run 3 included them)."""
    old = os.environ.get("FLASHSIM_POISON")
    os.environ["FLASHSIM_POISON"] = "0"
    try:
        return bench(fn, warmup, rep)
    finally:
        if old is None:
            del os.environ["FLASHSIM_POISON"]
        else:
            os.environ["FLASHSIM_POISON"] = old


def sdpa_fn(backend, q, k, v, causal):
    """A no-argument call of torch SDPA forced onto one backend (``torch.nn.attention.SDPBackend``), to time."""
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    def fn():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return fn


#: interleaved timing rounds per row (``--rounds``): the time of one kernel measured twice in one row, back to back,
#: differed by up to 16 % on the H200 (gluon_h200_2026-12-02_4.md), clock and L2 state drifting within a row; timing
#: every kernel of a row once per round, in a fresh order each round, and taking each ratio per round exposes every
#: kernel to the same drift, and the rounds' min-max says how far a ratio can be trusted
ROUNDS = 5


def time_rounds(fns, warmup, rep, rounds=None, seed=0):
    """{name: [ms of each round, None where it raised]} and {name: error}: ``rounds`` rounds, each a
    :func:`bench_unpoisoned` median of every function in ``fns`` once, in an order shuffled afresh each round
    (seeded, so a run can be repeated). Each function is called once first (compilation, autotuning), untimed."""
    rounds = ROUNDS if rounds is None else rounds
    rng = random.Random(seed)
    per, errors = {name: [None] * rounds for name in fns}, {}
    for name, fn in fns.items():
        try:
            fn()
        except Exception as exc:
            errors[name] = f"{type(exc).__name__}: {str(exc)[:300]}"
    for i in range(rounds):
        order = [name for name in fns if name not in errors]
        rng.shuffle(order)
        for name in order:
            try:
                per[name][i] = bench_unpoisoned(fns[name], warmup, rep)
            except Exception as exc:
                errors[name] = f"{type(exc).__name__}: {str(exc)[:300]}"
    return per, errors


def round_ratio(per, num, den):
    """(median, min, max) over rounds of num's time / den's time in the same round (> 1: ``den`` faster), or None
    when no round timed both."""
    rs = [a / b for a, b in zip(per.get(num) or (), per.get(den) or ()) if a is not None and b is not None]
    return (statistics.median(rs), min(rs), max(rs)) if rs else None


def put_ratio(row, key, per, num, den):
    """row[key] = the median per-round ratio num/den; row[key_min], row[key_max] = its range over the rounds."""
    r = round_ratio(per, num, den)
    if r is not None:
        row[key], row[f"{key}_min"], row[f"{key}_max"] = r


def time_fns(row, fns, fl, warmup, rep, suffix=""):
    """Time ``fns`` in interleaved rounds (:func:`time_rounds`) into ``row``: NAME_ms (median over rounds),
    NAME_rounds_ms, NAME_tflops, or NAME_error; then gluon{suffix}_vs_BASE for cuDNN, SDPA-flash and Triton, the
    median over rounds of BASE's time / Gluon's in the same round (> 1: Gluon faster), with its _min and _max."""
    per, errors = time_rounds(fns, warmup, rep, seed=len(row) + int(row.get("N", 0)))
    for name in fns:
        got = [x for x in per[name] if x is not None]
        if got:
            row[f"{name}_ms"] = statistics.median(got)
            row[f"{name}_tflops"] = fl / row[f"{name}_ms"] * 1e-9
            row[f"{name}_rounds_ms"] = per[name]
        if name in errors:
            row[f"{name}_error"] = errors[name]
    for base in ("cudnn", "flash", "triton"):
        put_ratio(row, f"gluon{suffix}_vs_{base}", per, f"{base}{suffix}", f"gluon{suffix}")
    return per


def bwd_flops(B, H, N, d, causal):
    """5 matmuls of N x N x d per head (2.5x the forward's 2)."""
    return 2.5 * flops(B, H, N, d, causal)


def bwd_sdpa_fn(backend, q, k, v, do, causal):
    """A no-argument call of torch SDPA's backward on one backend: ``autograd.grad`` on a graph saved under it."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel
    qt, kt, vt = (t.detach().clone().requires_grad_() for t in (q, k, v))
    with sdpa_kernel(backend):
        out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
    return lambda: torch.autograd.grad(out, (qt, kt, vt), do, retain_graph=True)

