"""Chapter 10 exercises: the CPU view.

* :func:`check_step_working_set` (10.2): the bytes one step of the CPU kernel touches, which must explain the
  blocks :func:`flashsim.cpu.default_blocks` picks for each cache size;
* :func:`check_blocked_attention_numpy` (10.1): a blocked FlashAttention forward in numpy, graded on its output
  against float64 and on its peak memory, measured with :func:`flashsim.measure.peak_memory.peak_memory_cpu`.
"""
from __future__ import annotations

import numpy as np

from flashsim import cpu
from flashsim.course.kit.checker import (LearnerError, Verdict, call_learner, diagnose_attention, error_verdict,
                                         exercise, verdict)
from flashsim.measure.peak_memory import peak_memory_cpu
from flashsim.model.hardware import get_device
from flashsim.model.table import Table

__all__ = ["check_step_working_set", "check_blocked_attention_numpy"]

BLOCKED_NUMPY = exercise(
    "10.1", "blocked attention in numpy",
    "fn(q, k, v, block) -> O: attention of float32 (N, d) arrays in numpy, blocked over the queries and over the "
    "keys, exact to 1e-4 and never holding more than about three times the output's size at once.",
    ("Which array would hold all N×N scores, and which smaller pieces can replace it?",
     "Loop over Q blocks outside and K/V blocks inside, keeping a running max, sum and accumulator per Q block "
     "(chapter 05's update).",
     "Keep, per Q block, a running max, a running sum and an unnormalised accumulator; after each K/V block "
     "bring the old sum and accumulator to the new max, and divide once at the end."),
    "check_blocked_attention_numpy")

STEP_WORKING_SET = exercise(
    "10.2", "one step's working set",
    "fn(block_r, block_c, d) -> bytes (float32) that one inner-loop step of flashsim.cpu's kernel touches; it must "
    "explain the blocks flashsim.cpu.default_blocks picks for each cache size.",
    ("Which blocks and tiles does one step of the kernel read or write?",
     "Count the Q block and its accumulator, the K and V blocks and the score tile, in float32; flashsim.cpu pads "
     "d to a whole vector of 16 floats.",
     "List the blocks one step touches (the Q block and its accumulator, the K and V blocks, the score tile) "
     "with d rounded up to a multiple of 16, at 4 bytes a float."),
    "check_step_working_set")


def _pad16(d: int) -> int:
    return -(-d // 16) * 16


#: working sets learners count for 10.2 (in float32 unless said), and what each misses or adds
_WORKING_SET_SUSPECTS = (
    ("s_tile_missing", lambda r, c, d: 4 * (2 * r * _pad16(d) + 2 * c * _pad16(d)),
     "your working set leaves out the Br × Bc score tile: it is on chip too, in float32"),
    ("accumulator_missing", lambda r, c, d: 4 * (r * _pad16(d) + 2 * c * _pad16(d) + r * c),
     "your working set leaves out the output accumulator (Br × d'): the Q block and its accumulator are both touched"),
    ("d_not_padded", lambda r, c, d: 4 * (2 * r * d + 2 * c * d + r * c),
     "you count d, not d padded to a multiple of 16: flashsim.cpu stores each row in whole vectors of 16 floats"),
    ("float64_assumed", lambda r, c, d: 8 * (2 * r * _pad16(d) + 2 * c * _pad16(d) + r * c),
     "your working set is in float64 (8 bytes): the kernel works in float32"),
    ("v_block_missing", lambda r, c, d: 4 * (2 * r * _pad16(d) + c * _pad16(d) + r * c),
     "your working set has one K/V block: a step touches both K_j and V_j"),
)


def _working_set_suspect(fn) -> tuple[str, str] | None:
    """(key, why) of a known working-set formula the learner's equals on a grid of blocks, else None."""
    grid = [(r, c, d) for r in (16, 64, 96) for c in (64, 256) for d in (32, 72, 128)]
    try:
        got = [int(call_learner(fn, r, c, d)) for r, c, d in grid]
    except (LearnerError, TypeError, ValueError):
        return None
    for key, formula, why in _WORKING_SET_SUSPECTS:
        if got == [formula(r, c, d) for r, c, d in grid]:
            return key, why
    return None


def check_step_working_set(fn, quiet: bool = False) -> Verdict:
    """Exercise 10.2: on caches of 256 KiB … 2 MiB and several d, your working set at the chosen blocks must fit in
    half the cache and must not fit with one more panel of columns (unless block_c is at its cap of 1024)."""
    panel = int(getattr(cpu, "_PANEL", 64))
    rows, bad = [], []
    for cache_kib in (256, 512, 1024, 2048):
        for d in (32, 64, 72, 128):
            hw = get_device("cpu", sram_bytes=cache_kib * 1024)
            br, bc = cpu.default_blocks(d, hw)
            budget = hw.sram_bytes // 2
            try:
                at, above = int(call_learner(fn, br, bc, d)), int(call_learner(fn, br, bc + panel, d))
            except LearnerError as err:
                return error_verdict(STEP_WORKING_SET, err, f"block_r={br}, block_c={bc}, d={d}", quiet=quiet)
            fits, tight = at <= budget or bc == panel, bc >= 1024 or above > budget
            rows.append([cache_kib, d, br, bc, at, budget, "✔" if fits and tight else "✘"])
            if not (fits and tight):
                bad.append((cache_kib, d, br, bc, at, above, budget, fits))
    table = Table(["cache KiB", "d", "block_r", "block_c", "your bytes", "half the cache", "ok"], rows)
    if not bad:
        r = rows[6]
        return verdict(STEP_WORKING_SET, True, f"your working set explains all {len(rows)} block sizes the CPU "
                       f"kernel picks (e.g. {r[2]} x {r[3]} on {r[0]} KiB at d={r[1]}: {r[4]:,} B of a {r[5]:,} B "
                       "budget)", table=table, quiet=quiet)
    kib, d, br, bc, at, above, budget, fits = bad[0]
    exact = _working_set_suspect(fn)
    if exact is not None:
        key, why = exact
    elif all(b[1] % 16 for b in bad):
        key, why = "d_not_padded", "only head dims that are not a multiple of 16 go wrong: how does flashsim.cpu store d?"
    elif all(not b[7] for b in bad):
        key, why = "too_large", (f"at the chosen {br} x {bc} your working set is {at:,} B, more than half the cache "
                                 f"({budget:,} B): something is counted that the step does not touch, or twice")
    elif all(b[7] for b in bad):
        key, why = "too_small", (f"with block_c = {bc + panel} your working set ({above:,} B) still fits in half "
                                 f"the cache ({budget:,} B), so the kernel would have picked it: something is missing")
    else:
        key, why = "mismatch", "some cases are too large and some too small"
    return verdict(STEP_WORKING_SET, False, f"{why} (cache {kib} KiB, d={d}; ✘ rows)", diagnosis=key, table=table,
                   quiet=quiet)


def check_blocked_attention_numpy(fn, n: int = 2048, d: int = 64, block: int = 64, quiet: bool = False) -> Verdict:
    """Exercise 10.1: the error against float64 attention (at most 1e-4) and the peak memory while it runs
    (tracemalloc), which must stay under 3 × the output's size."""
    rng = np.random.default_rng(10)
    rn, rd = 200, 16                        # a ragged N first (200 = 3 blocks of 64 and 8 rows): output only
    rq, rk, rv = (rng.standard_normal((rn, rd)).astype(np.float32) for _ in range(3))
    try:
        rout = np.asarray(call_learner(fn, rq, rk, rv, block))
    except LearnerError as err:
        return error_verdict(BLOCKED_NUMPY, err, f"N={rn}, d={rd}, block={block}", quiet=quiet)
    if rout.shape != (rn, rd):
        return verdict(BLOCKED_NUMPY, False, f"returned shape {rout.shape} at N={rn}, expected {(rn, rd)}: N need "
                       "not be a multiple of the block", diagnosis="wrong_shape", quiet=quiet)
    key, why, ev = diagnose_attention(rout, rq, rk, rv, causal=False, tol=1e-4, block_n=block, block_m=block)
    if key != "passed":
        return verdict(BLOCKED_NUMPY, False, f"{why} (N={rn}, d={rd}, block={block})", diagnosis=key, quiet=quiet,
                       **ev)
    q, k, v = (rng.standard_normal((n, d)).astype(np.float32) for _ in range(3))
    k = k + np.linspace(0, 2, n, dtype=np.float32)[:, None]          # later keys score higher: the max keeps growing
    try:
        peak = call_learner(peak_memory_cpu, fn, q, k, v, block, method="tracemalloc")
        out = np.asarray(call_learner(fn, q, k, v, block))
    except LearnerError as err:
        return error_verdict(BLOCKED_NUMPY, err, f"N={n}, d={d}, block={block}", quiet=quiet)
    out_bytes = n * d * 4
    limit = 3 * out_bytes
    table = Table(["", "yours", "limit"], [["peak bytes", peak, limit]])
    if out.shape != (n, d):
        return verdict(BLOCKED_NUMPY, False, f"returned shape {out.shape}, expected {(n, d)}",
                       diagnosis="wrong_shape", quiet=quiet)
    key, why, ev = diagnose_attention(out, q, k, v, causal=False, tol=1e-4, block_n=block, block_m=block)
    if key != "passed":
        return verdict(BLOCKED_NUMPY, False, why, diagnosis=key, table=table, peak_bytes=peak, quiet=quiet, **ev)
    err = ev["max_error"]
    if peak > limit:
        if peak >= n * n * 4 * 0.9:
            key, what = "peak_memory_nxn", "an N x N score matrix"
        elif peak >= block * n * 4:
            key, what = "peak_memory_row", "a row of scores for all keys at once (block x N)"
        else:
            key, what = "peak_memory_temporaries", "large temporaries"
        return verdict(BLOCKED_NUMPY, False, f"correct, but it allocated {peak:,} B at its peak, more than 3 x the "
                       f"output ({limit:,} B): it looks like {what}. Which loop is missing?", diagnosis=key,
                       table=table, max_error=err, peak_bytes=peak, quiet=quiet)
    return verdict(BLOCKED_NUMPY, True, f"correct (max error {err:.1e}) with a peak of {peak:,} B, "
                   f"{n * n * 4 / peak:.0f}x less than one N x N float32 matrix", table=table, max_error=err,
                   peak_bytes=peak, quiet=quiet)
