"""Timing for benchmarks/gluon_validate.py: ``triton.testing.do_bench`` medians, with the Gluon kernels' NaN
poisoning off, in interleaved rounds (every kernel of a row once per round, in a fresh order), ratios per round;
FLOP counts; SDPA calls forced onto one backend."""
from __future__ import annotations

import contextlib
import math
import os
import random
import statistics
import time

def flops(B, H, N, d, causal):
    f = 4.0 * B * H * N * N * d
    return f / 2 if causal else f


def bench(fn, warmup, rep):
    import triton
    return triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median")


@contextlib.contextmanager
def unpoisoned():
    """FLASHSIM_POISON off inside: the correctness checks fill the Gluon kernels' outputs with NaN before each
    launch (so that an unwritten element shows), which costs extra fill kernels (o and lse, or dk and dv) that no
    user's call runs; times are taken without them (runs up to 2026-12-02 run 3 included them)."""
    old = os.environ.get("FLASHSIM_POISON")
    os.environ["FLASHSIM_POISON"] = "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ["FLASHSIM_POISON"]
        else:
            os.environ["FLASHSIM_POISON"] = old


def bench_unpoisoned(fn, warmup, rep):
    """``bench`` with FLASHSIM_POISON off (:func:`unpoisoned`)."""
    with unpoisoned():
        return bench(fn, warmup, rep)


def sdpa_fn(backend, q, k, v, causal):
    """A no-argument call of torch SDPA forced onto one backend (``torch.nn.attention.SDPBackend``), to time."""
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    def fn():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return fn


#: interleaved timing rounds per row (``--rounds``): the time of one kernel measured twice in one row, back to back,
#: differed by up to 16 % on the H200 (benchmarks/results/NOTES.md), clock and L2 state drifting within a row; timing
#: every kernel of a row once per round, in a fresh order each round, and taking each ratio per round exposes every
#: kernel to the same drift, and the rounds' min-max says how far a ratio can be trusted
ROUNDS = 5

#: how a row's kernels are timed (``--timing``): "rounds" (:data:`ROUNDS` rounds, each a do_bench median of every
#: kernel in turn, :func:`time_rounds`) or "calls" (:data:`ITERS` iterations, every kernel once per iteration, each
#: call timed on its own after an L2 flush as do_bench times its calls, :func:`time_calls`). In "rounds" the kernels
#: of one round are timed about a second apart, and one kernel's median moved 10-20 % from round to round on the
#: H200 (clocks under its power limit; benchmarks/results/NOTES.md), which spreads the per-round ratios
#: +-5-10 %; in "calls" the calls of one iteration are milliseconds apart, so their ratio sees one clock.
MODE = "rounds"
#: iterations of "calls" timing (``--iters``); each is one "round" of the row's records
ITERS = 60


class CudaTimer:
    """What :func:`time_calls` needs from the GPU: an L2 flush (triton's benchmark cache, as do_bench clears it),
    a CUDA event recorded now, the milliseconds between two events, and a synchronisation."""

    def __init__(self):
        import torch
        from triton import runtime
        self._torch, self._driver = torch, runtime.driver.active
        if hasattr(self._driver, "get_empty_cache_for_benchmark"):
            self._cache = self._driver.get_empty_cache_for_benchmark()
        else:                                 # an older triton's do_bench: 256 MB, more than any L2
            self._cache = torch.empty(int(256e6 // 4), dtype=torch.int, device="cuda")

    def flush(self):
        if hasattr(self._driver, "clear_cache"):
            self._driver.clear_cache(self._cache)
        else:                                 # an older triton's do_bench zeroes the buffer itself
            self._cache.zero_()

    def mark(self):
        event = self._torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    @staticmethod
    def elapsed_ms(a, b):
        return a.elapsed_time(b)

    def sync(self):
        self._torch.cuda.synchronize()


def median_interval(xs, coverage=0.9375):
    """(low, high): order statistics of `xs` that hold its median with probability >= `coverage` (distribution-
    free, from the binomial(n, 1/2) law of how many samples fall below the median). The default is the coverage of
    min-max over 5 rounds, so that "beyond the spread" means the same for 5 rounds and for many calls: for n = 5
    it is (min, max), for n = 60 the 23rd and 38th smallest."""
    xs = sorted(xs)
    n = len(xs)
    k, cdf = 0, 0.0                        # the largest k with P(B <= k - 1) <= (1 - coverage) / 2, B ~ Bin(n, 1/2)
    while k < n // 2:
        cdf += math.comb(n, k) / 2 ** n
        if cdf > (1 - coverage) / 2:
            break
        k += 1
    k = max(k, 1)
    return xs[k - 1], xs[n - k]


def _first_calls(fns):
    """Call each function once, untimed (compilation, autotuning): {name: error} of those that raised."""
    errors = {}
    for name, fn in fns.items():
        try:
            fn()
        except Exception as exc:
            errors[name] = f"{type(exc).__name__}: {str(exc)[:300]}"
    return errors


def time_calls(fns, warmup, rep, iters=None, seed=0, timer=None):
    """{name: [ms of each iteration, None where it raised]} and {name: error}, the shape of :func:`time_rounds`'s
    result with one entry per iteration: ``iters`` iterations, each calling every function in ``fns`` once in an
    order shuffled afresh (seeded), each call timed on its own between two CUDA events after an L2 flush. Each
    function is called once first (compilation), untimed, then whole iterations run untimed for ``warmup`` ms
    (``rep`` is not used: the number of calls is ``iters``). ``timer``: :class:`CudaTimer` unless given (a test's)."""
    iters = ITERS if iters is None else iters
    timer = CudaTimer() if timer is None else timer
    rng = random.Random(seed)
    per, errors = {name: [None] * iters for name in fns}, _first_calls(fns)
    with unpoisoned():
        end = time.perf_counter() + warmup / 1e3
        while True:
            for name in fns:
                if name not in errors:
                    timer.flush()
                    fns[name]()
            timer.sync()
            if time.perf_counter() >= end:
                break
        marks = []
        for i in range(iters):
            order = [name for name in fns if name not in errors]
            rng.shuffle(order)
            for name in order:
                timer.flush()
                try:
                    a = timer.mark()
                    fns[name]()
                    b = timer.mark()
                except Exception as exc:
                    errors[name] = f"{type(exc).__name__}: {str(exc)[:300]}"
                    continue
                marks.append((name, i, a, b))
        timer.sync()
    for name, i, a, b in marks:
        per[name][i] = timer.elapsed_ms(a, b)
    return per, errors


def time_rounds(fns, warmup, rep, rounds=None, seed=0):
    """{name: [ms of each round, None where it raised]} and {name: error}: ``rounds`` rounds, each a
    :func:`bench_unpoisoned` median of every function in ``fns`` once, in an order shuffled afresh each round
    (seeded, so a run can be repeated). Each function is called once first (compilation, autotuning), untimed.
    With :data:`MODE` "calls", :func:`time_calls` instead (one entry per iteration)."""
    if MODE == "calls":
        return time_calls(fns, warmup, rep, seed=seed)
    rounds = ROUNDS if rounds is None else rounds
    rng = random.Random(seed)
    per, errors = {name: [None] * rounds for name in fns}, _first_calls(fns)
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
    """(median, low, high) over rounds of num's time / den's time in the same round (> 1: ``den`` faster), or None
    when no round timed both. (low, high): min and max over the rounds; with :data:`MODE` "calls", over many
    iterations, :func:`median_interval` (the median's interval of the coverage min-max has over 5 rounds)."""
    rs = [a / b for a, b in zip(per.get(num) or (), per.get(den) or ()) if a is not None and b is not None]
    if not rs:
        return None
    return (statistics.median(rs), *(median_interval(rs) if MODE == "calls" else (min(rs), max(rs))))


def put_ratio(row, key, per, num, den):
    """row[key] = the median per-round ratio num/den; row[key_min], row[key_max] = its range over the rounds."""
    r = round_ratio(per, num, den)
    if r is not None:
        row[key], row[f"{key}_min"], row[f"{key}_max"] = r


def time_fns(row, fns, fl, warmup, rep, suffix=""):
    """Time ``fns`` in interleaved rounds (:func:`time_rounds`) into ``row``: NAME_ms (median over rounds),
    NAME_rounds_ms, NAME_tflops, or NAME_error; then gluon{suffix}_vs_BASE for cuDNN, SDPA-flash, Triton and FA4,
    the median over rounds of BASE's time / Gluon's in the same round (> 1: Gluon faster), with its _min and _max;
    triton{suffix}_vs_fa4 and fa4{suffix}_vs_cudnn likewise (where those columns were timed)."""
    per, errors = time_rounds(fns, warmup, rep, seed=len(row) + int(row.get("N", 0)))
    for name in fns:
        got = [x for x in per[name] if x is not None]
        if got:
            row[f"{name}_ms"] = statistics.median(got)
            row[f"{name}_tflops"] = fl / row[f"{name}_ms"] * 1e-9
            row[f"{name}_rounds_ms"] = per[name]
        if name in errors:
            row[f"{name}_error"] = errors[name]
    for base in ("cudnn", "flash", "triton", "fa4"):
        put_ratio(row, f"gluon{suffix}_vs_{base}", per, f"{base}{suffix}", f"gluon{suffix}")
    # FlashAttention-4 (an optional column): the course's Triton kernel against it, and it against cuDNN
    put_ratio(row, f"triton{suffix}_vs_fa4", per, f"fa4{suffix}", f"triton{suffix}")
    put_ratio(row, f"fa4{suffix}_vs_cudnn", per, f"cudnn{suffix}", f"fa4{suffix}")
    return per


def bwd_flops(B, H, N, d, causal):
    """5 matmuls of N x N x d per head (2.5x the forward's 2)."""
    return 2.5 * flops(B, H, N, d, causal)


def bwd_sdpa_fn(backend, q, k, v, do, causal):
    """A no-argument call of torch SDPA's backward on one backend: ``autograd.grad`` on a graph saved under it."""
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    def attention(qt, kt, vt, causal):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
    return bwd_fn(attention, q, k, v, do, causal)


def bwd_fn(attention, q, k, v, do, causal):
    """A no-argument call of the backward of ``attention(q, k, v, causal) -> o`` (any differentiable attention, e.g.
    FA4's): ``autograd.grad`` on a graph saved once, on copies of q, k, v."""
    import torch
    qt, kt, vt = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out = attention(qt, kt, vt, causal)
    return lambda: torch.autograd.grad(out, (qt, kt, vt), do, retain_graph=True)

