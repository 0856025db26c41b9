"""Chapter 13 solutions (reference answers to :mod:`flashsim.course.ch13.checks`)."""
from __future__ import annotations

import numpy as np

__all__ = ["combine_by_logsumexp", "ring_bytes_per_device", "overlap_min_rows"]

#: exercise id -> the functions that solve it (what flashsim.exercises.reveal shows)
SOLUTIONS = {"13.1": ("combine_by_logsumexp",), "13.2": ("ring_bytes_per_device",), "13.3": ("overlap_min_rows",)}


def combine_by_logsumexp(o_parts, lse_parts):
    """Merge S partial attention results (o_s normalised over chunk s, L_s its logsumexp): subtract the largest
    L before exponentiating (chapter 04), weight each o_s by e^(L_s − L)."""
    o_parts, lse_parts = np.asarray(o_parts, np.float64), np.asarray(lse_parts, np.float64)
    m = lse_parts.max(axis=0)                      # (nq,)
    w = np.exp(lse_parts - m)                      # (S, nq), each ≤ 1
    lse = m + np.log(w.sum(axis=0))
    o = (w[:, :, None] * o_parts).sum(axis=0) / w.sum(axis=0)[:, None]
    return o, lse




def ring_bytes_per_device(n, d, world, heads, elem_bytes, causal):
    """Bytes device r sends to r+1: P−1 messages of K_j and V_j (2·H·(N/P)·d·b); causal: r+1 messages for
    r < P−1 (block j goes j → … → P−1 and never around the wrap), none from the last device."""
    msg = 2 * heads * (n // world) * d * elem_bytes
    if causal:
        return [(r + 1) * msg if r < world - 1 else 0 for r in range(world)]
    return [(world - 1) * msg] * world




def overlap_min_rows(peak_flops, link_bytes_per_s, elem_bytes):
    """4n²d / F ≥ 2ndb / W  ⇔  n ≥ b·F / (2W)."""
    return elem_bytes * peak_flops / (2 * link_bytes_per_s)
