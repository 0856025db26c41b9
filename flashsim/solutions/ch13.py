"""Chapter 13 solutions (reference answers to :mod:`flashsim.course.ch13.checks`), plus the plausible wrong answers
the tests make sure the checkers reject."""
from __future__ import annotations

import numpy as np

__all__ = ["combine_by_logsumexp", "ring_bytes_per_device", "overlap_min_rows"]


def combine_by_logsumexp(o_parts, lse_parts):
    """Merge S partial attention results (o_s normalised over chunk s, L_s its logsumexp): subtract the largest
    L before exponentiating (chapter 04), weight each o_s by e^(L_s − L)."""
    o_parts, lse_parts = np.asarray(o_parts, np.float64), np.asarray(lse_parts, np.float64)
    m = lse_parts.max(axis=0)                      # (nq,)
    w = np.exp(lse_parts - m)                      # (S, nq), each ≤ 1
    lse = m + np.log(w.sum(axis=0))
    o = (w[:, :, None] * o_parts).sum(axis=0) / w.sum(axis=0)[:, None]
    return o, lse


def wrong_combine_mean(o_parts, lse_parts):
    """Averages the partial outputs: right only when every chunk has the same softmax mass."""
    o_parts = np.asarray(o_parts, np.float64)
    return o_parts.mean(axis=0), np.asarray(lse_parts, np.float64).max(axis=0)


def wrong_combine_no_max(o_parts, lse_parts):
    """Right formula without the max: e^(L_s) overflows once the logsumexps are large."""
    o_parts, lse_parts = np.asarray(o_parts, np.float64), np.asarray(lse_parts, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        w = np.exp(lse_parts)
        return (w[:, :, None] * o_parts).sum(axis=0) / w.sum(axis=0)[:, None], np.log(w.sum(axis=0))


def ring_bytes_per_device(n, d, world, heads, elem_bytes, causal):
    """Bytes device r sends to r+1: P−1 messages of K_j and V_j (2·H·(N/P)·d·b); causal: r+1 messages for
    r < P−1 (block j goes j → … → P−1 and never around the wrap), none from the last device."""
    msg = 2 * heads * (n // world) * d * elem_bytes
    if causal:
        return [(r + 1) * msg if r < world - 1 else 0 for r in range(world)]
    return [(world - 1) * msg] * world


def wrong_ring_bytes_causal_same(n, d, world, heads, elem_bytes, causal):
    """Forgets that causal blocks need not travel around the wrap."""
    return [(world - 1) * 2 * heads * (n // world) * d * elem_bytes] * world


def wrong_ring_bytes_p_messages(n, d, world, heads, elem_bytes, causal):
    """P messages per device: the last step sends a block nobody needs."""
    msg = 2 * heads * (n // world) * d * elem_bytes
    if causal:
        return [(r + 1) * msg if r < world - 1 else 0 for r in range(world)]
    return [world * msg] * world


def overlap_min_rows(peak_flops, link_bytes_per_s, elem_bytes):
    """4n²d / F ≥ 2ndb / W  ⇔  n ≥ b·F / (2W)."""
    return elem_bytes * peak_flops / (2 * link_bytes_per_s)


def wrong_overlap_f_over_w(peak_flops, link_bytes_per_s, elem_bytes):
    """The paper's rule of thumb F/W: right for 2-byte elements only."""
    return peak_flops / link_bytes_per_s
