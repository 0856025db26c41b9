"""Chapter 06 exercises: memory — predict what the naive implementation allocates (checked against a measurement),
and how long a context fits.

The tables these checkers print are memory tables (bytes held at the peak, predicted vs measured or vs the model),
not traffic: chapter 06 is about what sits in memory, not what moves.
"""
from __future__ import annotations

import numpy as np

from flashsim.course import Table
from flashsim.course.ch00.checks import Verdict
from flashsim.course.ch05.checks import finish, raised

__all__ = ["check_naive_numpy_peak_bytes", "check_max_context_length"]


def _table(header, rows) -> Table:
    return Table(list(header), [list(r) for r in rows])


def check_naive_numpy_peak_bytes(fn, ns=(256, 512, 1024, 2048), d: int = 64, rel_tol: float = 0.03,
                                 quiet: bool = False) -> Verdict:
    """Exercise 06.1: ``fn(n, d) -> bytes``, the peak memory :func:`flashsim.cpu.naive_attention_numpy` allocates
    on one float32 (N, d) head. The checker *measures* it with :func:`flashsim.measure.peak_memory.peak_memory_cpu`
    (tracemalloc) and accepts predictions within 3 %.

    Introduced in chapter 06.
    """
    from flashsim.cpu import naive_attention_numpy
    from flashsim.measure.peak_memory import peak_memory_cpu
    name = "naive_numpy_peak_bytes"
    rng = np.random.default_rng(0)
    rows, worst = [], 0.0
    for n in ns:
        q, k, v = (rng.standard_normal((n, d), dtype=np.float32) for _ in range(3))
        measured = peak_memory_cpu(naive_attention_numpy, q, k, v, method="tracemalloc")
        try:
            got = int(fn(n, d))
        except Exception as exc:  # noqa: BLE001
            return finish(name, False, f"{raised(exc)} (N={n}, d={d})", quiet=quiet)
        rel = got / measured - 1
        worst = max(worst, abs(rel))
        rows.append((n, got, measured, f"{rel:+.1%}", "✔" if abs(rel) <= rel_tol else "✘"))
    table = _table(("N", "your bytes", "measured bytes", "difference", "ok"), rows)
    if worst > rel_tol:
        return finish(name, False, f"off by up to {worst:.0%} from the measured peak: which N×N buffers exist at the "
                                   "same time? (read flashsim.cpu.naive_attention_numpy: the softmax is in place)",
                      table, worst=worst, quiet=quiet)
    return finish(name, True, f"within {worst:.1%} of tracemalloc's measurement at every N: the N² term is it",
                  table, worst=worst, quiet=quiet)


def check_max_context_length(fn, quiet: bool = False) -> Verdict:
    """Exercise 06.2: ``fn(capacity_bytes, d, batch_heads, elem_bytes, algo) -> N``, the largest N whose attention
    memory (chapter 06's model, :func:`flashsim.widgets.attention_memory_bytes`) fits in `capacity_bytes`, for
    algo "naive" or "flash"."""
    from flashsim.solutions.ch06 import max_context_length
    from flashsim.course.ch06.dashboards import HBM_CAPACITY_BYTES, attention_memory_bytes
    name = "max_context_length"
    cases = [(HBM_CAPACITY_BYTES["h200"], 128, 32, 2), (HBM_CAPACITY_BYTES["a100"], 64, 16 * 8, 2),
             (HBM_CAPACITY_BYTES["t4"], 64, 1, 4), (10**6, 16, 3, 2)]
    rows = []
    for cap, d, bh, b in cases:
        for algo in ("naive", "flash"):
            want = max_context_length(cap, d, bh, b, algo)
            try:
                got = int(fn(cap, d, bh, b, algo))
            except Exception as exc:  # noqa: BLE001
                return finish(name, False, f"{raised(exc)}", quiet=quiet)
            used = attention_memory_bytes(algo, got, d, bh, b)
            rows.append((algo, f"{cap / 1e9:g} GB", d, bh, b, got, want, f"{used / 1e9:.4g} GB",
                         "✔" if got == want else "✘"))
            if got != want:
                why = ("does not fit: that N needs more than the capacity" if used > cap else
                       "fits, but a larger N fits too")
                table = _table(("algo", "capacity", "d", "heads", "b", "your N", "largest N", "your N needs", "ok"), rows)
                return finish(name, False, f"{algo}, {cap:,.0f} B, d={d}, {bh} heads, b={b}: N={got:,} {why} "
                                           f"(largest is {want:,})", table, quiet=quiet)
    table = _table(("algo", "capacity", "d", "heads", "b", "your N", "largest N", "your N needs", "ok"), rows)
    return finish(name, True, "the longest contexts are right for both algorithms", table, quiet=quiet)
