"""bench: the median time of a call (``triton.testing.do_bench`` on a GPU, wall clock in the interpreter)."""
from __future__ import annotations

import statistics
import time

from flashsim.kernels.runtime import interpreting


def bench(fn, warmup: int = 25, rep: int = 100) -> float:
    """Median milliseconds of ``fn()``: ``triton.testing.do_bench`` on a GPU, wall clock in the interpreter."""
    if not interpreting():
        import triton.testing             # lazily: triton is an optional dependency
        return float(triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)
