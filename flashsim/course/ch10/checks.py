"""Chapter 10 exercises: the CPU view. Each ``check_...(fn)`` prints a verdict and a table and returns a
:class:`~flashsim.course.ch05.checks.Verdict`. Solutions: :mod:`flashsim.solutions.ch10`.

* :func:`check_step_working_set` (10.2): the bytes one step of the CPU kernel touches, which must explain the
  blocks :func:`flashsim.cpu.default_blocks` picks for each cache size;
* :func:`check_blocked_attention_numpy` (10.1): a blocked FlashAttention forward in numpy, graded on its output
  against float64 and on its peak memory, measured with :func:`flashsim.measure.peak_memory.peak_memory_cpu`.
"""
from __future__ import annotations

import numpy as np

from flashsim.course.ch05.checks import finish, reference_attention

__all__ = ["check_step_working_set", "check_blocked_attention_numpy"]


def check_step_working_set(fn):
    """Exercise 10.2: ``fn(block_r, block_c, d) -> bytes`` (float32) one inner-loop step touches.

    The checker asks :func:`flashsim.cpu.default_blocks` for the blocks it picks on caches of 256 KiB ... 2 MiB and
    several d; your working set must fit in half the cache at the chosen blocks, and must not fit with one more
    panel of columns (unless block_c is at its cap of 1024) — i.e. it must explain the package's choice.
    """
    from flashsim import cpu
    from flashsim.model.hardware import get_device
    panel = int(getattr(cpu, "_PANEL", 64))
    name = "step_working_set"
    rows = []
    for cache_kib in (256, 512, 1024, 2048):
        for d in (32, 64, 72, 128):
            hw = get_device("cpu", sram_bytes=cache_kib * 1024)
            br, bc = cpu.default_blocks(d, hw)
            budget = hw.sram_bytes // 2
            try:
                at = int(fn(br, bc, d))
                above = int(fn(br, bc + panel, d))
            except Exception as exc:  # noqa: BLE001 - a learner's bug is reported, not raised
                return finish(name, False, f"raised {type(exc).__name__}: {exc} (block_r={br}, block_c={bc}, d={d})")
            rows.append((cache_kib, d, br, bc, at, budget))
            fits = at <= budget or bc == panel
            tight = bc >= 1024 or above > budget
            if not (fits and tight):
                why = (f"at the chosen {br} x {bc} your working set is {at:,} B, more than half the cache "
                       f"({budget:,} B)" if not fits else
                       f"with block_c = {bc + panel} your working set ({above:,} B) still fits in half the cache "
                       f"({budget:,} B), so the package would have picked it: something is missing")
                return finish(name, False, f"{why} (cache {cache_kib} KiB, d={d}). Count Q block + accumulator, "
                              "K and V blocks, and the S tile, in float32, with d padded to a multiple of 16",
                              cases=rows)
    return finish(name, True, f"your working set explains all {len(rows)} block sizes the CPU kernel picks (e.g. "
                  f"{rows[6][2]} x {rows[6][3]} on {rows[6][0]} KiB at d={rows[6][1]}: {rows[6][4]:,} B of a "
                  f"{rows[6][5]:,} B budget)", cases=rows)


def check_blocked_attention_numpy(fn, n: int = 2048, d: int = 64, block: int = 64):
    """Exercise 10.1: ``fn(q, k, v, block) -> O`` in numpy (float32 in, (N, d) out), blocked over Q and K/V.

    Graded on the error against float64 attention (at most 1e-4) and on the peak memory it allocates while it runs
    (tracemalloc), which must stay under 3 × the output's size: no (N × N) scores, and no (block × N) row of them.
    """
    from flashsim.measure.peak_memory import peak_memory_cpu
    name = "blocked_attention_numpy"
    rng = np.random.default_rng(10)
    q, k, v = (rng.standard_normal((n, d)).astype(np.float32) for _ in range(3))
    k = k + np.linspace(0, 2, n, dtype=np.float32)[:, None]          # later keys score higher: the max keeps growing
    try:
        with np.errstate(all="ignore"):
            peak = peak_memory_cpu(fn, q, k, v, block, method="tracemalloc")
            out = np.asarray(fn(q, k, v, block))
    except Exception as exc:  # noqa: BLE001
        return finish(name, False, f"raised {type(exc).__name__}: {exc}")
    out_bytes = n * d * 4
    limit = 3 * out_bytes
    rows = None
    if out.shape != (n, d):
        return finish(name, False, f"returned shape {out.shape}, expected {(n, d)}", rows)
    err = float(np.abs(out.astype(np.float64) - reference_attention(q, k, v)).max())
    if not np.isfinite(err) or err > 1e-4:
        return finish(name, False, f"max |O - exact| = {err:.3g} > 1e-4: when a tile raises the row max, rescale l and "
                      "the accumulator by exp(m_old - m_new)", rows, max_error=err, peak_bytes=peak)
    if peak > limit:
        what = ("an N x N score matrix" if peak >= n * n * 4 * 0.9 else
                "a row of scores for all keys at once (block x N)" if peak >= block * n * 4 else "large temporaries")
        return finish(name, False, f"correct, but it allocated {peak:,} B at its peak, more than 3 x the output "
                      f"({limit:,} B): it looks like {what}. Loop over K/V blocks too, with the online softmax",
                      rows, max_error=err, peak_bytes=peak)
    return finish(name, True, f"correct (max error {err:.1e}) with a peak of {peak:,} B, {n * n * 4 / peak:.0f}x "
                  f"less than one N x N float32 matrix", rows, max_error=err, peak_bytes=peak)
