"""Chapter 11 exercises: pitfalls.

* :func:`check_fair_reference` (11.1): write the reference a causal fp16 flash kernel must be compared with;
* :func:`check_flash_flops` (11.2): FLOPs over the tiles computed, causal or not: still Θ(N²);
* :func:`check_merge_partials` (11.3): merge two partial (m, ℓ, o) results, the bookkeeping that split-KV
  (flash-decoding) kernels get wrong.
"""
from __future__ import annotations

import numpy as np

from flashsim.course.kit.checker import (LearnerError, Suspect, Verdict, call_learner, check_cases,
                                         diagnose_attention, error_verdict, exercise, loop_table, verdict)
from flashsim.model.attention.reference import plain_attention, reference_attention
from flashsim.model.dtypes import round_to
from flashsim.model.simulator import simulate, traffic
from flashsim.model.table import Table

__all__ = ["check_fair_reference", "check_merge_partials", "check_flash_flops"]

FAIR_REFERENCE = exercise(
    "11.1", "a fair reference",
    "fn(q, k, v) -> O (N, d): the reference output a causal flash kernel that ran in fp16 must be compared with. "
    "q, k, v are given as the kernel stored them (rounded to fp16, as float32 arrays).",
    ("What exactly did the kernel compute, and in what precision should the yardstick be?",
     "Same formula as the kernel (the scale, the mask), computed in float64 on the inputs the kernel saw.",
     "Cast q, k, v to float64, set the scores above the diagonal to −inf before the softmax, and keep the "
     "kernel's 1/√d."),
    "check_fair_reference")

FLASH_FLOPS = exercise(
    "11.2", "FLOPs over the computed tiles",
    "fn(n, d, block_r, block_c, causal) -> int: the matmul FLOPs of the flash forward over the tiles it computes.",
    ("Which two matmuls does each tile do, and which tiles does a causal loop leave out?",
     "Count per computed tile; a causal loop skips only tiles entirely above the diagonal and computes the others "
     "in full; blocks at a ragged end are smaller.",
     "Walk the tiles the flash loop computes (causal: skip a tile only when it lies entirely above the "
     "diagonal) and add the FLOPs of both matmuls of each tile at its real size."),
    "check_flash_flops")

MERGE_PARTIALS = exercise(
    "11.3", "merge two partial results",
    "fn(a, b) -> (m, l, o): merge two partial results of the same query rows over disjoint sets of keys. Each part "
    "is (m, l, o): its row max (R,), its sum of exponentials relative to m (R,), its normalised output (R, d). An "
    "empty part is (−inf, 0, 0).",
    ("Each part was normalised by its own sum relative to its own max. What must both be brought to?",
     "Give each part a weight from its l and the gap between its max and the merged max; the merged output is the "
     "weighted mean.",
     "Weigh each part by its whole softmax mass, brought to the larger max; the merged l is the sum of the "
     "weights and o their weighted mean (an empty part weighs 0)."),
    "check_merge_partials")


def check_fair_reference(fn, quiet: bool = False) -> Verdict:
    """Exercise 11.1: your reference against a causal fp16 flash2 run on the simulator; passes when the difference
    is rounding-sized (at most 4× the error of a plain fp16 implementation against float64)."""
    worst, sim = 0.0, None
    for n, d, seed in ((96, 32, 0), (100, 16, 1)):
        rng = np.random.default_rng(seed)
        q, k, v = (rng.standard_normal((1, n, d)).astype(np.float32) for _ in range(3))
        sim = simulate("flash2", n, d, dtype="fp16", causal=True, inputs=(q, k, v), record_events=False)
        stored = [np.asarray(round_to(x[0], "fp16"), np.float32) for x in (q, k, v)]
        exact = reference_attention(*stored, causal=True)
        plain, _ = plain_attention(*stored, causal=True, dtype="fp16")
        allowed = 4 * float(np.abs(np.asarray(plain, np.float64) - exact).max()) + 1e-6
        try:
            ref = np.asarray(call_learner(fn, *(x.copy() for x in stored)), np.float64)
        except LearnerError as err:
            return error_verdict(FAIR_REFERENCE, err, f"N={n}, d={d}", quiet=quiet)
        if ref.shape != (n, d):
            return verdict(FAIR_REFERENCE, False, f"returned shape {ref.shape}, expected (N, d) = {(n, d)}",
                           diagnosis="wrong_shape", quiet=quiet)
        err = float(np.abs(np.asarray(sim.out[0], np.float64) - ref).max()) if np.isfinite(ref).all() else np.inf
        worst = max(worst, err)
        if not err <= allowed:
            key, why, ev = diagnose_attention(ref, *stored, causal=True, tol=allowed)
            if key == "passed":
                key, why = "too_far", f"your reference is {err:.3g} from the flash output"
            return verdict(FAIR_REFERENCE, False, f"max |flash − yours| = {err:.3g} > {allowed:.2g} at N={n}, d={d}: "
                           f"{why}", diagnosis=key, max_error=err, quiet=quiet)
    return verdict(FAIR_REFERENCE, True, f"flash and your reference differ by rounding only (max {worst:.2e}); the "
                   "table is the bytes of the simulated flash run you were compared with (your reference moves none)",
                   table=loop_table(sim.counters, label="the simulated flash2 run"), max_error=worst, quiet=quiet)


def _flops_ref(n, d, br, bc, causal):
    return traffic("flash2", n, d, block_r=br, block_c=bc, causal=causal, sram_bytes=4 << 20).flops


def _tile_flops(n, d, br, bc, causal, ragged=True) -> int:
    """4·r·c·d over the tiles a (causal) loop computes, r × c the tile's size (Br × Bc when ragged is False)."""
    total = 0
    for i0 in range(0, n, br):
        for j0 in range(0, n, bc):
            if causal and j0 > min(i0 + br, n) - 1:
                continue
            total += 4 * (min(br, n - i0) if ragged else br) * (min(bc, n - j0) if ragged else bc) * d
    return total


def check_flash_flops(fn, quiet: bool = False) -> Verdict:
    """Exercise 11.2: against ``flashsim.traffic("flash2", ...).flops``."""
    cases = [(256, 64, 64, 64, False), (1000, 64, 64, 128, False), (256, 64, 64, 64, True), (1000, 32, 32, 64, True),
             (4096, 128, 128, 64, True)]
    suspects = (Suspect("causal_ignored", lambda n, d, br, bc, c: _flops_ref(n, d, br, bc, False),
                        "your causal counts equal the non-causal ones: a causal loop skips the tiles above the "
                        "diagonal"),
                Suspect("causal_exact_half", lambda n, d, br, bc, c: _flops_ref(n, d, br, bc, False) // (2 if c else 1),
                        "your causal count is exactly half: the tiles the diagonal crosses are computed in full"),
                Suspect("one_matmul_per_tile", lambda n, d, br, bc, c: _flops_ref(n, d, br, bc, c) // 2,
                        "your count is half: each tile does two matmuls, S = Q Kᵀ and P V, 2 FLOPs per "
                        "multiply-add each"),
                Suspect("ragged_tiles_full", lambda n, d, br, bc, c: _tile_flops(n, d, br, bc, c, ragged=False),
                        "your count gives every tile the full Br × Bc: the tiles at the ragged end are smaller"),
                Suspect("visible_elements_only", lambda n, d, br, bc, c: 4 * d * (n * (n + 1) // 2 if c else n * n),
                        "your causal count covers only the visible scores: a tile the diagonal crosses is computed "
                        "in full, then masked"))
    return check_cases(FLASH_FLOPS, fn, cases, _flops_ref, header=("N, d, Br, Bc, causal", "simulator's FLOPs",
                                                                   "your FLOPs"),
                       suspects=suspects, quiet=quiet)


def _partial(scores, values):
    """(m, l, o) of rows of scores (R, C) and values (C, d): o normalised. Empty C gives (-inf, 0, 0)."""
    if scores.shape[1] == 0:
        r = scores.shape[0]
        return np.full(r, -np.inf), np.zeros(r), np.zeros((r, values.shape[1]))
    m = scores.max(axis=1)
    p = np.exp(scores - m[:, None])
    l = p.sum(axis=1)
    return m, l, (p @ values) / l[:, None]


def check_merge_partials(fn, quiet: bool = False) -> Verdict:
    """Exercise 11.3: rows of scores split into 2–4 parts whose maxima differ, merged in both orders, against
    attention over all keys; an empty part (−inf, 0, 0) must change nothing."""
    rng = np.random.default_rng(11)
    rows, worst = [], 0.0
    for case, (r, c, d, cuts) in enumerate(((4, 40, 8, (10,)), (6, 64, 16, (8, 40)), (3, 30, 4, (5, 6, 20)))):
        scores = rng.standard_normal((r, c)) * 3 + np.linspace(0, 6, c)   # later keys larger: maxima differ
        values = rng.standard_normal((c, d))
        p = np.exp(scores - scores.max(axis=1, keepdims=True))
        exact = (p / p.sum(axis=1, keepdims=True)) @ values
        edges = (0, *cuts, c)
        parts = [_partial(scores[:, a:b], values[a:b]) for a, b in zip(edges[:-1], edges[1:])]
        try:
            left = parts[0]
            for part in parts[1:]:
                left = call_learner(fn, left, part)
            right = parts[-1]
            for part in reversed(parts[:-1]):
                right = call_learner(fn, part, right)
            with_empty = call_learner(fn, parts[0], _partial(scores[:, :0], values[:0]))
        except LearnerError as err:
            return error_verdict(MERGE_PARTIALS, err, f"case {case}", quiet=quiet)
        errs = {}
        for what, got, want in (("left to right", left, exact), ("right to left", right, exact),
                                ("with an empty part", with_empty, parts[0][2])):
            o = np.asarray(got[2], np.float64)
            errs[what] = float(np.abs(o - want).max()) if np.isfinite(o).all() else np.inf
        rows.append([case, *(f"{e:.2g}" for e in errs.values()), "✔" if max(errs.values()) < 1e-9 else "✘"])
        table = Table(["case", "left to right", "right to left", "with an empty part", "ok"], rows)
        for what, err in errs.items():
            worst = max(worst, err)
            if err < 1e-9:
                continue
            a, b = parts[0], parts[1]
            o_got = np.asarray(call_learner(fn, a, b)[2], np.float64)
            m = np.maximum(a[0], b[0])
            plain_w = (a[1][:, None] * a[2] + b[1][:, None] * b[2]) / (a[1] + b[1])[:, None]
            wa, wb = a[1] * np.exp(a[0] - m), b[1] * np.exp(b[0] - m)
            unnormalised = wa[:, None] * a[2] + wb[:, None] * b[2]
            if what == "with an empty part":
                key, why = "empty_part", ("merging with an empty part (m = −inf, l = 0) changes the result: an empty "
                                          "part must weigh nothing, e^(−inf) = 0 (and 0·0 must not become NaN)")
            elif not np.isfinite(o_got).all():
                key, why = "non_finite", "the merged o holds NaN/inf"
            elif np.allclose(o_got, plain_w, atol=1e-9):
                key, why = "missing_rescale", ("your merge weighs each part by its l alone: each l is relative to its "
                                               "own max, and the maxima differ")
            elif np.allclose(o_got, (np.exp(a[0] - m)[:, None] * a[2] + np.exp(b[0] - m)[:, None] * b[2])
                             / (np.exp(a[0] - m) + np.exp(b[0] - m))[:, None], atol=1e-9):
                key, why = "l_ignored", ("your merge weighs each part by e^(m_x − m) alone: a part's weight is its "
                                         "whole softmax mass, l_x·e^(m_x − m)")
            elif np.allclose(o_got, unnormalised, atol=1e-9):
                key, why = "missing_normalisation", ("your merged o is the weighted sum, not divided by the merged l: "
                                                     "each row is the right row times a factor")
            else:
                key, why = "wrong_merge", f"the merged o is off by {err:.3g}"
            return verdict(MERGE_PARTIALS, False, f"{why} ({what}, case {case}; ✘ rows)", diagnosis=key,
                           table=table, max_error=err, quiet=quiet)
        l_ref = p.sum(axis=1) * np.exp(scores.max(axis=1) - np.asarray(left[0], np.float64))
        l_err = float(np.abs(np.asarray(left[1], np.float64) - l_ref).max())
        if not l_err < 1e-9 * max(1.0, float(np.abs(l_ref).max())):
            return verdict(MERGE_PARTIALS, False, f"o is right but l is off by {l_err:.3g} (case {case}): the merged "
                           "l must be the sum over all keys relative to the merged max", diagnosis="wrong_l",
                           table=table, quiet=quiet)
    return verdict(MERGE_PARTIALS, True, f"merges match attention over all keys in every order (max error "
                   f"{worst:.1e})", table=table, max_error=worst, quiet=quiet)
