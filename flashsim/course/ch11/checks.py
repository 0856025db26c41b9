"""Chapter 11 exercises: pitfalls. Each ``check_...(fn)`` prints a verdict and a read/write table and returns a
:class:`~flashsim.course.ch05.checks.Verdict` (truthy when right). Solutions: :mod:`flashsim.solutions.ch11`.

* :func:`check_fair_reference` (11.1): write the reference a causal fp16 flash kernel must be compared with;
* :func:`check_merge_partials` (11.3): merge two partial (m, ℓ, o) results, the bookkeeping that split-KV
  (flash-decoding) kernels get wrong;
* :func:`check_flash_flops` (11.2): FLOPs over the tiles computed, causal or not: still Θ(N²).
"""
from __future__ import annotations

import math

import numpy as np

from flashsim.course.ch05.checks import finish, reference_attention, rw_table

__all__ = ["check_fair_reference", "check_merge_partials", "check_flash_flops"]


def check_fair_reference(fn):
    """Exercise 11.1: ``fn(q, k, v) -> O`` (N, d), the reference for a **causal** flash kernel that ran in fp16.

    q, k, v are given as the kernel stored them (rounded to fp16, as float32 arrays). The checker runs flash2 on
    the simulator (causal, fp16) and accepts your reference when the difference is rounding-sized: at most 4× the
    error of a plain fp16 implementation against float64.
    """
    from flashsim.model.simulator import reference_outputs, simulate
    from flashsim.model.dtypes import round_to
    name = "fair_reference"
    worst = 0.0
    for n, d, seed in ((96, 32, 0), (100, 16, 1)):
        rng = np.random.default_rng(seed)
        q, k, v = (rng.standard_normal((1, n, d)).astype(np.float32) for _ in range(3))
        sim = simulate("flash2", n, d, dtype="fp16", causal=True, inputs=(q, k, v), record_events=False)
        stored = [np.asarray(round_to(x[0], "fp16"), np.float32) for x in (q, k, v)]
        exact = reference_attention(*stored, causal=True)
        plain, _ = reference_outputs(*stored, causal=True, dtype="fp16")
        allowed = 4 * float(np.abs(np.asarray(plain, np.float64) - exact).max()) + 1e-6
        try:
            ref = np.asarray(fn(*(x.copy() for x in stored)), np.float64)
        except Exception as exc:  # noqa: BLE001 - a learner's bug is reported, not raised
            return finish(name, False, f"raised {type(exc).__name__}: {exc} (N={n}, d={d})")
        if ref.shape != (n, d):
            return finish(name, False, f"returned shape {ref.shape}, expected (N, d) = {(n, d)}")
        rows = np.abs(np.asarray(sim.out[0], np.float64) - ref).max(axis=1)
        err = float(rows.max())
        worst = max(worst, err)
        if not err <= allowed:
            first, last = float(rows[: max(1, n // 8)].max()), float(rows[-1])
            hint = ("the error is large in the first rows and ~0 in the last: your reference has no causal mask"
                    if last < 0.1 * first else "is it softmax(q kᵀ / √d) v? the kernel scales by 1/√d")
            return finish(name, False, f"max |flash − reference| = {err:.3g} > {allowed:.2g} at N={n}, d={d}: {hint}",
                          max_error=err)
    return finish(name, True, f"flash and your reference differ by rounding only (max {worst:.2e}); the read/write "
                  "table is the flash run's", rw_table(sim.counters), max_error=worst)


def _partial(scores, values):
    """(m, l, o) of rows of scores (R, C) and values (C, d): o normalised. Empty C gives (-inf, 0, 0)."""
    if scores.shape[1] == 0:
        r = scores.shape[0]
        return np.full(r, -np.inf), np.zeros(r), np.zeros((r, values.shape[1]))
    m = scores.max(axis=1)
    p = np.exp(scores - m[:, None])
    l = p.sum(axis=1)
    return m, l, (p @ values) / l[:, None]


def check_merge_partials(fn):
    """Exercise 11.3: ``fn(a, b) -> (m, l, o)`` merges two partial results of the same rows over disjoint keys.

    Each part is (m, l, o): m (R,) its row max, l (R,) = Σ e^(s − m), o (R, d) its *normalised* output Σ e^(s−m) v / l.
    The checker splits rows of scores into 2–4 parts whose maxima differ, merges them in several orders, and
    compares with attention over all keys; an empty part (−inf, 0, 0) must change nothing.
    """
    name = "merge_partials"
    rng = np.random.default_rng(11)
    worst = 0.0
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
                left = fn(left, part)
            right = parts[-1]
            for part in reversed(parts[:-1]):
                right = fn(part, right)
            with_empty = fn(parts[0], _partial(scores[:, :0], values[:0]))
        except Exception as exc:  # noqa: BLE001
            return finish(name, False, f"raised {type(exc).__name__}: {exc} (case {case})")
        errs = {"left to right": float(np.abs(np.asarray(left[2]) - exact).max()),
                "right to left": float(np.abs(np.asarray(right[2]) - exact).max()),
                "with an empty part": float(np.abs(np.asarray(with_empty[2]) - parts[0][2]).max())}
        l_err = float(np.abs(np.asarray(left[1]) - p.sum(axis=1) * np.exp(scores.max(axis=1) - left[0])).max())
        for what, err in errs.items():
            worst = max(worst, err if np.isfinite(err) else math.inf)
            if not err < 1e-9:
                hint = ("each part's l and o must be rescaled by e^(m_part − m_new) before they are combined: "
                        "the missing rescale of chapter 11" if what != "with an empty part" else
                        "an empty part (m = −inf, l = 0) is the identity: e^(−inf − m) = 0")
                return finish(name, False, f"merged o is off by {err:.3g} ({what}, case {case}): {hint}",
                              max_error=err)
        if not l_err < 1e-9 * max(1.0, float(np.abs(left[1]).max())):
            return finish(name, False, f"o is right but l is off by {l_err:.3g} (case {case}): l must be "
                          "Σ e^(s − m) over all keys, relative to the merged max m")
    return finish(name, True, f"merges match attention over all keys in every order (max error {worst:.1e})")


def check_flash_flops(fn):
    """Exercise 11.2: ``fn(n, d, block_r, block_c, causal) -> int``, matmul FLOPs of the flash forward.

    Compared with ``flashsim.traffic("flash2", ...).flops``: 4·r·c·d per computed tile (S = QKᵀ and PV), causal
    tiles entirely above the diagonal skipped, diagonal tiles computed in full.
    """
    from flashsim.model.simulator import traffic
    name = "flash_flops"
    for n, d, br, bc, causal in ((256, 64, 64, 64, False), (1000, 64, 64, 128, False), (256, 64, 64, 64, True),
                                 (1000, 32, 32, 64, True), (4096, 128, 128, 64, True)):
        t = traffic("flash2", n, d, block_r=br, block_c=bc, causal=causal, sram_bytes=4 << 20)
        try:
            got = int(fn(n, d, br, bc, causal))
        except Exception as exc:  # noqa: BLE001
            return finish(name, False, f"raised {type(exc).__name__}: {exc}")
        if got != t.flops:
            ratio = got / t.flops if t.flops else math.inf
            hint = ("causal skips only tiles entirely above the diagonal; the diagonal tiles are computed in full, "
                    "so the count is a bit more than half of 4·N²·d" if causal else
                    "4·r·c·d per tile: 2 FLOPs per multiply-add, for S = QKᵀ and for PV")
            return finish(name, False, f"got {got:,}, the simulator counts {t.flops:,} ({ratio:.3f}×) at N={n}, "
                          f"d={d}, Br={br}, Bc={bc}, causal={causal}: {hint}")
    return finish(name, True, "FLOPs match the simulator; causal or not, they grow as N²: FlashAttention saves "
                  "bytes, not arithmetic", rw_table(t.as_dict()))
