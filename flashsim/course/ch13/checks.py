"""Chapter 13 exercises: the combine step of flash-decoding, the ring's link bytes, and the overlap condition.

Each ``check_...(fn)`` runs the learner's function against the simulator (:mod:`flashsim.model.multi.cluster`), prints
a verdict and a table, and returns chapter 00's :class:`~flashsim.course.ch00.checks.Verdict`. Reference answers:
:mod:`flashsim.solutions.ch13`.
"""
from __future__ import annotations

import numpy as np

from flashsim.course import Table
from flashsim.course.ch05.checks import finish, raised

__all__ = ["check_combine", "check_ring_link_bytes", "check_overlap_block"]


def check_combine(fn):
    """``fn(o_parts (S, nq, d), lse_parts (S, nq)) -> (o (nq, d), lse (nq,))`` must equal one-pass attention,
    also when the scores are large (logsumexps near 1000) and when chunks hold very different softmax mass."""
    from flashsim.model.multi.cluster import block_attention_numpy, split_partials
    rng = np.random.default_rng(13)
    cases = [("4 chunks, unit scores", 1.0, 4, 0.0), ("7 chunks, one holds the big scores", 1.0, 7, 6.0),
             ("3 chunks, scores near 1000", 30.0, 3, 0.0)]
    rows, ok = [], True
    for label, scale_up, splits, bump in cases:
        q = rng.standard_normal((3, 16)) * scale_up
        k = rng.standard_normal((90, 16)) * scale_up
        k[:12] += bump * q.mean(axis=0) / max(np.linalg.norm(q.mean(axis=0)), 1e-9) * 4   # one chunk dominates
        v = rng.standard_normal((90, 16))
        o_parts, lse_parts = split_partials(q, k, v, splits)
        want_o, want_lse = block_attention_numpy(q, k, v, 16 ** -0.5)
        try:
            got_o, got_lse = fn(o_parts.copy(), lse_parts.copy())
            got_o, got_lse = np.asarray(got_o, np.float64), np.asarray(got_lse, np.float64)
            err_o = float(np.abs(got_o - want_o).max()) if got_o.shape == want_o.shape else np.inf
            err_l = float(np.abs(got_lse - want_lse).max()) if got_lse.shape == want_lse.shape else np.inf
        except Exception as exc:  # the learner's code
            return finish("combine", False, raised(exc))
        good = bool(np.isfinite(err_o) and np.isfinite(err_l) and err_o < 1e-9 and err_l < 1e-9)
        ok &= good
        rows.append([label, f"{float(lse_parts.max()):.4g}", f"{err_o:.2e}", f"{err_l:.2e}", "✔" if good else "✘"])
    table = Table(["case", "largest L_s", "max |o error|", "max |lse error|", "ok"], rows)
    msg = ("your combine equals one-pass attention in every case" if ok else
           "a case differs from one-pass attention: weight each o_s by e^(L_s − L), subtract the largest L_s "
           "before exponentiating")
    return finish("combine", ok, msg, table)


def check_ring_link_bytes(fn):
    """``fn(n, d, world, heads, elem_bytes, causal) -> [bytes device r sends to r+1 for r in range(world)]``,
    checked against the simulator's link counters."""
    from flashsim.model.multi.cluster import ring_attention
    cases = [(4096, 64, 2, 8, 2, False), (4096, 64, 2, 8, 2, True), (3 * 1024, 128, 3, 4, 2, False),
             (8 * 512, 64, 8, 2, 4, True), (8 * 512, 64, 8, 2, 1, False)]
    rows, ok = [], True
    for n, d, world, heads, b, causal in cases:
        # 1-byte elements (fp8): the simulator has no fp8 dtype, so its fp16 bytes are halved
        dtype = {2: "fp16", 4: "fp32"}.get(b, "fp16")
        want = ring_attention(n, d, world, heads=heads, dtype=dtype, causal=causal).link_bytes
        if b == 1:
            want = [x // 2 for x in want]
        try:
            got = [int(x) for x in fn(n, d, world, heads, b, causal)]
        except Exception as exc:  # the learner's code
            return finish("ring link bytes", False, raised(exc))
        good = got == want
        ok &= good
        rows.append([f"N={n}, d={d}, P={world}, H={heads}, b={b}, {'causal' if causal else 'full'}",
                     str(got), str(want), "✔" if good else "✘"])
    table = Table(["case", "yours", "simulator", "ok"], rows)
    msg = ("your bytes equal the simulator's link counters" if ok else
           "some link bytes differ: how many messages does each device send, and which blocks does nobody "
           "downstream need when the mask is causal?")
    return finish("ring link bytes", ok, msg, table)


def check_overlap_block(fn):
    """``fn(peak_flops, link_bytes_per_s, elem_bytes) -> n``: the smallest block whose compute hides the transfer,
    checked where the simulator's step times cross, for several devices, links and element sizes."""
    from flashsim.model.hardware import get_device
    from flashsim.model.multi.cluster import get_link
    cases = [("h200", "nvlink4", 2), ("h200", "infiniband_ndr", 2), ("a100", "nvlink3", 2), ("h100", "pcie5", 4),
             ("h200", "nvlink4", 1)]
    rows, ok = [], True
    for dev, link, b in cases:
        F, W = get_device(dev).peak_matmul_flops, get_link(link).bandwidth_bytes_per_s
        want = b * F / (2 * W)
        try:
            got = float(fn(F, W, b))
        except Exception as exc:  # the learner's code
            return finish("overlap block", False, raised(exc))
        # at the learner's n, compute (4n²d/F) vs transfer (2ndb/W) must balance: their ratio is got / want
        good = bool(np.isfinite(got) and abs(got / want - 1) < 1e-6)
        ok &= good
        rows.append([f"{dev} over {link}, {b}-byte elements", f"{got:,.0f}", f"{want:,.0f}",
                     f"{got / want:.3g}" if want else "—", "✔" if good else "✘"])
    table = Table(["case", "your n", "simulator's crossing", "compute / transfer at your n", "ok"], rows)
    msg = ("compute and transfer balance exactly at your n" if ok else
           "write one step's compute time and transfer time in n, set them equal, and keep the element size")
    return finish("overlap block", ok, msg, table)
