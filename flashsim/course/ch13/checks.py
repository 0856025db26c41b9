"""Chapter 13 exercises: the combine step of flash-decoding, the ring's link bytes, and the overlap condition.

Each ``check_...(fn)`` runs the learner's function against the model (:mod:`flashsim.model.multi.cluster` and the
reference attention), prints a verdict and a table, and returns a :class:`~flashsim.course.kit.checker.Verdict`.
"""
from __future__ import annotations

import numpy as np

from flashsim.course.kit.checker import (LearnerError, Suspect, Verdict, call_learner, check_cases, error_verdict,
                                         exercise, verdict)
from flashsim.model.attention.reference import reference_attention
from flashsim.model.hardware import get_device
from flashsim.model.multi.cluster import get_link, ring_attention, split_partials
from flashsim.model.table import Table

__all__ = ["check_combine", "check_ring_link_bytes", "check_overlap_block"]

COMBINE = exercise(
    "13.1", "combine split-KV partials",
    "fn(o_parts (S, nq, d), lse_parts (S, nq)) -> (o (nq, d), lse (nq,)): one-pass attention's output and logsumexp "
    "from S partial results over disjoint chunks of keys (each o_s normalised over its chunk), also when the "
    "logsumexps are near 1000.",
    ("How much of a row's softmax mass does chunk s hold, in terms of its logsumexp?",
     "Weight each chunk's output by its share of the total mass; compute the shares without ever forming e^L "
     "(chapter 04's trick).",
     "Subtract the largest L_s before exponentiating; normalise the weights e^(L_s − M) to sum to 1; the "
     "merged L is M plus the log of their sum."),
    "check_combine")

RING_BYTES = exercise(
    "13.2", "the ring's link bytes",
    "fn(n, d, world, heads, elem_bytes, causal) -> [bytes device r sends to device r+1 for r in range(world)] in "
    "ring attention over `world` devices, each holding N/world rows.",
    ("How many times must each K/V block move so that every device has seen it?",
     "Each step sends one block of K and one of V (all heads); under a causal mask, which blocks does nobody "
     "downstream need?",
     "Each step sends one K and one V block of N/world rows for every head; non-causal, a device sends world "
     "− 1 of them; causal, count which blocks the devices downstream still need."),
    "check_ring_link_bytes")

OVERLAP = exercise(
    "13.3", "the block that hides the transfer",
    "fn(peak_flops, link_bytes_per_s, elem_bytes) -> n: the smallest block of n rows whose attention compute takes "
    "as long as sending its K and V over the link.",
    ("Write the compute time and the transfer time of one step, both as functions of n. How do they grow?",
     "A step computes 4·n²·d FLOPs on a block and sends its K and V, 2·n·d·b bytes.",
     "Set a step's compute time 4·n²·d / F equal to its transfer time 2·n·d·b / W and solve for n (d "
     "cancels)."),
    "check_overlap_block")


def check_combine(fn, quiet: bool = False) -> Verdict:
    """Exercise 13.1: against one-pass float64 attention, with unit scores, one dominating chunk, scores near 1000."""
    rng = np.random.default_rng(13)
    cases = [("4 chunks, unit scores", 1.0, 4, 0.0), ("7 chunks, one holds the big scores", 1.0, 7, 6.0),
             ("3 chunks, scores near 1000", 30.0, 3, 0.0)]
    rows, first_bad = [], None
    for label, scale_up, splits, bump in cases:
        q = rng.standard_normal((3, 16)) * scale_up
        k = rng.standard_normal((90, 16)) * scale_up
        k[:12] += bump * q.mean(axis=0) / max(np.linalg.norm(q.mean(axis=0)), 1e-9) * 4   # one chunk dominates
        v = rng.standard_normal((90, 16))
        o_parts, lse_parts = split_partials(q, k, v, splits)
        want_o, want_lse = reference_attention(q, k, v, return_lse=True)
        try:
            got_o, got_lse = (np.asarray(x, np.float64) for x in call_learner(fn, o_parts.copy(), lse_parts.copy()))
        except LearnerError as err:
            return error_verdict(COMBINE, err, label, quiet=quiet)
        err_o = float(np.abs(got_o - want_o).max()) if got_o.shape == want_o.shape else np.inf
        err_l = float(np.abs(got_lse - want_lse).max()) if got_lse.shape == want_lse.shape else np.inf
        good = bool(np.isfinite(err_o) and np.isfinite(err_l) and err_o < 1e-9 and err_l < 1e-9)
        rows.append([label, f"{float(lse_parts.max()):.4g}", f"{err_o:.2e}", f"{err_l:.2e}", "✔" if good else "✘"])
        if not good and first_bad is None:
            mean_o = o_parts.mean(axis=0)
            m = lse_parts.max(axis=0)
            w = np.exp(lse_parts - m)                                             # (S, nq)
            unnormalised = (w[:, :, None] * o_parts).sum(axis=0)
            linear = (lse_parts[:, :, None] * o_parts).sum(axis=0) / lse_parts.sum(axis=0)[:, None]
            if not (np.isfinite(got_o).all() and np.isfinite(got_lse).all()):
                key, why = "overflow", (f"NaN/inf with logsumexps up to {float(lse_parts.max()):.0f}: e^L overflows "
                                        "there. What can be subtracted from every L_s first?")
            elif got_o.shape == mean_o.shape and np.allclose(got_o, mean_o, atol=1e-9):
                key, why = "equal_weights", ("your o is the plain mean of the chunks' outputs: chunks hold different "
                                             "shares of the softmax mass")
            elif got_o.shape == unnormalised.shape and np.allclose(got_o, unnormalised, atol=1e-9):
                key, why = "missing_normalisation", ("your o is Σ e^(L_s − M)·o_s, not divided by Σ e^(L_s − M): "
                                                     "the weights must sum to 1")
            elif got_o.shape == linear.shape and np.allclose(got_o, linear, atol=1e-9):
                key, why = "linear_weights", ("your weights are proportional to L_s itself: L_s is a logarithm, so "
                                              "chunk s holds a share proportional to e^(L_s)")
            elif err_o < 1e-9:
                key, why = "lse_wrong", "o is right but the logsumexp is not: it covers the whole row, all chunks"
            else:
                key, why = "wrong_combine", f"o is off by {err_o:.3g}"
            first_bad = (key, f"{label}: {why}")
    table = Table(["case", "largest L_s", "max |o error|", "max |lse error|", "ok"], rows)
    if first_bad is None:
        return verdict(COMBINE, True, "your combine equals one-pass attention in every case", table=table, quiet=quiet)
    return verdict(COMBINE, False, first_bad[1] + " (✘ rows)", diagnosis=first_bad[0], table=table, quiet=quiet)


def _ring_ref(n, d, world, heads, b, causal):
    dtype = {2: "fp16", 4: "fp32"}.get(b, "fp16")   # 1-byte elements (fp8): the simulator's fp16 bytes, halved
    want = ring_attention(n, d, world, heads=heads, dtype=dtype, causal=causal).link_bytes
    return [x // 2 for x in want] if b == 1 else list(want)


def check_ring_link_bytes(fn, quiet: bool = False) -> Verdict:
    """Exercise 13.2: against the simulator's link counters."""
    cases = [(4096, 64, 2, 8, 2, False), (4096, 64, 2, 8, 2, True), (3 * 1024, 128, 3, 4, 2, False),
             (8 * 512, 64, 8, 2, 4, True), (8 * 512, 64, 8, 2, 1, False)]

    def msg(n, d, p, h, b):
        return 2 * h * (n // p) * d * b
    suspects = (Suspect("causal_ignored", lambda n, d, p, h, b, c: [(p - 1) * msg(n, d, p, h, b)] * p,
                        "your causal bytes equal the non-causal ones: under the mask no block needs to travel "
                        "around the wrap"),
                Suspect("p_messages", lambda n, d, p, h, b, c: _ring_ref(n, d, p, h, b, c) if c else
                        [p * msg(n, d, p, h, b)] * p,
                        "each device sends P messages: after P − 1 steps every device has seen every block"),
                Suspect("one_head", lambda n, d, p, h, b, c: _ring_ref(n, d, p, 1, b, c),
                        "your bytes are one head's: the K and V blocks of all heads travel"),
                Suspect("whole_sequence_blocks", lambda n, d, p, h, b, c: [x * p for x in _ring_ref(n, d, p, h, b, c)],
                        "each of your messages is N rows long: a device holds and sends N/world rows"),
                Suspect("k_only", lambda n, d, p, h, b, c: [x // 2 for x in _ring_ref(n, d, p, h, b, c)],
                        "your messages carry K alone: every step sends the K block and the V block"))
    return check_cases(RING_BYTES, lambda *a: [int(x) for x in fn(*a)], cases, _ring_ref,
                       header=("N, d, P, H, b, causal", "simulator", "yours"), suspects=suspects, quiet=quiet)


def _overlap_ref(flops, link, b):
    return b * flops / (2 * link)


def check_overlap_block(fn, quiet: bool = False) -> Verdict:
    """Exercise 13.3: where the simulator's step times cross, for several devices, links and element sizes."""
    cases = [(get_device(dev).peak_matmul_flops, get_link(link).bandwidth_bytes_per_s, b)
             for dev, link, b in (("h200", "nvlink4", 2), ("h200", "infiniband_ndr", 2), ("a100", "nvlink3", 2),
                                  ("h100", "pcie5", 4), ("h200", "nvlink4", 1))]
    suspects = (Suspect("f_over_w", lambda f, w, b: f / w, "your n is F/W, the rule of thumb for 2-byte elements: "
                        "the element size changes the bytes of a block"),
                Suspect("inverted", lambda f, w, b: 2 * w / (b * f), "your n is the inverse: more FLOP/s means a "
                        "larger block is needed to hide the same link"),
                Suspect("one_matmul_or_one_tensor", lambda f, w, b: b * f / w,
                        "your n is twice the crossing: either your compute counts one matmul (2·n²·d) or your "
                        "transfer one tensor (n·d·b); a step does both matmuls and sends K and V"),
                Suspect("v_forgotten", lambda f, w, b: b * f / (4 * w),
                        "your n is half the crossing: your compute counts both matmuls (4·n²·d) but your transfer "
                        "only K (n·d·b); V travels too"),
                Suspect("elem_bytes_missing", lambda f, w, b: f / (2 * w),
                        "your n ignores the element size: the transfer is 2·n·d·b bytes"))
    return check_cases(OVERLAP, fn, cases, _overlap_ref, rel=1e-6,
                       header=("F, W, b", "simulator's crossing n", "your n"),
                       describe=lambda f, w, b: f"F={f:.3g}, W={w:.3g}, b={b}", suspects=suspects, quiet=quiet)
