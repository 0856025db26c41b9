"""Chapter 14 solutions (reference answers to :mod:`flashsim.course.ch14.checks`)."""
from __future__ import annotations

import math

__all__ = ["gluon_kv_bytes", "heads_per_group"]

#: exercise id -> the functions that solve it (what flashsim.exercises.reveal shows)
SOLUTIONS = {"14.1": ("gluon_kv_bytes",), "14.2": ("heads_per_group",)}


def gluon_kv_bytes(n, d, consumers, block_n, causal, elem_bytes):
    """FA2 with BLOCK_M = consumers × 64: query tile i reads K/V tiles 0..J_i−1 once (shared by its consumers),
    J_i = ⌈min((i+1)·B_M, N) / B_N⌉ (⌈N / B_N⌉ without the mask); rows past N are not counted."""
    block_m = consumers * 64
    rows = 0
    for i in range(math.ceil(n / block_m)):
        hi = min((i + 1) * block_m, n) if causal else n
        rows += min(math.ceil(hi / block_n) * block_n, n)
    return 2 * rows * d * elem_bytes


def heads_per_group(section_bytes, n, d, elem_bytes, heads):
    """As many heads as fit their K and V (2·N·d·b bytes each) in the section, at least one, at most all."""
    return min(heads, max(1, section_bytes // (2 * n * d * elem_bytes)))
