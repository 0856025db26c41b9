"""Chapter 14 solutions (reference answers to :mod:`flashsim.course.ch14.checks`)."""
from __future__ import annotations

import math

__all__ = ["ring_slot_phase", "lpt_makespan", "gluon_kv_bytes"]

#: exercise id -> the functions that solve it (what flashsim.exercises.reveal shows)
SOLUTIONS = {"14.1": ("ring_slot_phase",), "14.2": ("lpt_makespan",), "14.3": ("gluon_kv_bytes",)}


def ring_slot_phase(i, stages):
    """Tile i lands in slot i mod S, in round r = i // S. Each round completes the slot's ready barrier once, so a
    consumer waits for parity r mod 2; the producer waits for the release of round r − 1, the opposite parity (in
    round 0 that wait passes at once: a fresh barrier counts as having completed phase 1)."""
    r = i // stages
    return i % stages, r % 2, 1 - r % 2


def lpt_makespan(costs, ctas):
    """Longest first, each tile to the least-loaded CTA; the grid ends when the busiest CTA does."""
    loads = [0.0] * ctas
    for c in sorted(costs, reverse=True):
        k = loads.index(min(loads))
        loads[k] += c
    return max(loads)


def gluon_kv_bytes(n, d, consumers, block_n, causal, elem_bytes):
    """FA2 with B_r = consumers × 64: query tile i reads K/V tiles 0..J_i−1 once (shared by its consumers),
    J_i = ⌈min((i+1)·B_r, N) / B_N⌉ (⌈N / B_N⌉ without the mask); rows past N are not counted."""
    block_m = consumers * 64
    rows = 0
    for i in range(math.ceil(n / block_m)):
        hi = min((i + 1) * block_m, n) if causal else n
        rows += min(math.ceil(hi / block_n) * block_n, n)
    return 2 * rows * d * elem_bytes
