"""Chapter 09 solutions: FA2's forward HBM bytes in closed form, and the compulsory DRAM bytes behind L2."""
from __future__ import annotations

__all__ = ["flash2_forward_bytes", "compulsory_dram_bytes"]

#: exercise id -> the functions that solve it (what flashsim.exercises.reveal shows)
SOLUTIONS = {"09.1": ("flash2_forward_bytes",), "09.2": ("compulsory_dram_bytes",)}


def flash2_forward_bytes(n: int, d: int, block_r: int, elem_bytes: int, stats_bytes: int) -> int:
    """Exercise 09.1, causal, Bc = Br: row block i reads the K and V rows up to the end of its own rows,
    min((i+1)·Br, N) of each (the last tile masked at N); Q is read and O and the logsumexp written once."""
    t_r = -(-n // block_r)
    kv_rows = sum(min((i + 1) * block_r, n) for i in range(t_r))
    reads = n * d * elem_bytes + 2 * kv_rows * d * elem_bytes
    writes = n * d * elem_bytes + n * stats_bytes
    return reads + writes


def compulsory_dram_bytes(batch: int, heads: int, n: int, d: int, elem_bytes: int) -> int:
    """Exercise 09.2: every tensor crosses DRAM once: Q, K, V read, O written, plus the fp32 logsumexp written."""
    return batch * heads * (4 * n * d * elem_bytes + 4 * n)
