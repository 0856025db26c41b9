"""Chapter 05 exercises: the FlashAttention forward loop, checked on the simulated memory hierarchy.

Each ``check_...(fn)`` runs the learner's function, prints a verdict with its diagnosis and a read/write table
(bytes by tensor, yours against the algorithm's) and returns a :class:`~flashsim.course.kit.checker.Verdict`.
Outputs are compared with the model's float64 reference attention.
"""
from __future__ import annotations

from flashsim.course.kit.checker import (LearnerError, Suspect, Verdict, call_learner, check_cases,
                                         diagnose_attention, error_verdict, exercise, fa2_on_memory, io_differs,
                                         io_rows, random_qkv, verdict)
from flashsim.model.attention.visibility import n_blocks
from flashsim.model.memory import Counters, Memory
from flashsim.model.simulator import traffic

__all__ = ["check_online_block_update", "check_flash2_forward_loop", "check_fa1_hbm_bytes",
           "expected_flash2_counters"]

ONLINE_BLOCK_UPDATE = exercise(
    "05.1", "online block update",
    "fn(m, l, acc, s, v) -> (m_new, l_new, acc_new): fold one K/V tile into the running state of the FA2 inner "
    "loop, so that after the last tile acc / l is the attention output. m, l: (Br,) running max and sum; acc: "
    "(Br, d) unnormalised output; s: (Br, Bc) scaled scores; v: (Bc, d).",
    ("Chapter 04 folded a block of scores into (m, l). What else must follow the running max now?",
     "Everything summed so far (l and acc) was weighted relative to the old max; the tile's own terms use the "
     "new one.",
     "m' = max(m, rowmax s); α = e^(m − m'); P = e^(s − m'); l' = α·l + rowsum P; acc' = α·acc + P v"),
    "check_online_block_update")

FLASH2_FORWARD_LOOP = exercise(
    "05.2", "the FA2 forward loop",
    "fn(mem, n, d, block_r, block_c) runs the FlashAttention-2 forward on a Memory holding Q, K, V and an empty O "
    "(fp32), with mem.load / mem.store, so that O is right and every tensor moves exactly the bytes of FA2's loop "
    "order. N need not be a multiple of the blocks.",
    ("Which loop is outside in FA2, the one over Q blocks or the one over K/V blocks, and what stays on chip?",
     "Load Q_i once per row block; stream every K_j, V_j past it; store O_i once; your 05.1 update does the math.",
     "bytes: Q read once, K and V read ⌈N/Br⌉ times each, O written once (N·d·4 each pass)"),
    "check_flash2_forward_loop")

FA1_HBM_BYTES = exercise(
    "05.3", "Algorithm 1's HBM bytes",
    "fn(n, d, block_c, elem_bytes) -> int: the HBM bytes (reads + writes) of FlashAttention-1's forward "
    "(Algorithm 1), every element, the statistics included, stored in elem_bytes, without the initial memset.",
    ("In Algorithm 1 which loop is outside, and what does the inner loop read and write on every pass?",
     "For each K/V block the inner loop walks over all N query rows: it reads Q_i, O_i, ℓ_i, m_i and writes O_i, "
     "ℓ_i, m_i back.",
     "(2·N·d + ⌈N/Bc⌉·(3·N·d + 4·N))·b"),
    "check_fa1_hbm_bytes")


def check_online_block_update(fn, quiet: bool = False) -> Verdict:
    """Exercise 05.1: a whole FA2 forward with ``fn`` plugged in (several block shapes, a ragged last block, scores
    large enough to overflow without the max), O against float64 attention."""
    worst, counters = 0.0, None
    for n, d, br, bc, seed, amp in ((16, 8, 4, 4, 0, 1.0), (37, 16, 8, 16, 1, 1.0), (24, 8, 8, 4, 2, 30.0)):
        where = f"N={n}, d={d}, Br={br}, Bc={bc}"
        q, k, v = random_qkv(n, d, seed, amp)
        try:
            out, counters = fa2_on_memory(q, k, v, br, bc, update=fn)
        except LearnerError as err:
            return error_verdict(ONLINE_BLOCK_UPDATE, err, where, quiet=quiet)
        key, why, ev = diagnose_attention(out, q, k, v, causal=False, tol=1e-4, block_n=bc, block_m=br)
        if key != "passed":
            return verdict(ONLINE_BLOCK_UPDATE, False, f"{why} ({where})", diagnosis=key, table=io_rows(counters),
                           quiet=quiet, **ev)
        worst = max(worst, ev["max_error"])
    return verdict(ONLINE_BLOCK_UPDATE, True, f"O matches float64 attention (max error {worst:.2e}); the read/write "
                   "table is the FA2 loop your update ran in", table=io_rows(counters), max_error=worst, quiet=quiet)


def expected_flash2_counters(n: int, d: int, block_r: int, elem_bytes: int = 4) -> Counters:
    """Per-tensor bytes of the FA2 forward (without the logsumexp): Q once, K and V once per row block, O once."""
    tr = n_blocks(n, block_r)
    c = Counters()
    c.add_read("Q", n * d * elem_bytes)
    c.add_read("K", tr * n * d * elem_bytes)
    c.add_read("V", tr * n * d * elem_bytes)
    c.add_write("O", n * d * elem_bytes)
    return c


def check_flash2_forward_loop(fn, quiet: bool = False) -> Verdict:
    """Exercise 05.2: O against float64 attention, and the bytes per tensor against FA2's
    (:func:`expected_flash2_counters`)."""
    rows = []
    for n, d, br, bc, seed in ((16, 8, 4, 8, 3), (30, 8, 8, 4, 4)):
        where = f"N={n}, d={d}, Br={br}, Bc={bc}"
        q, k, v = random_qkv(n, d, seed)
        mem = Memory(sram_capacity_bytes=1 << 30, dtype="fp32", record_events=False)
        for nm, x in (("Q", q), ("K", k), ("V", v)):
            mem.put(nm, x)
        mem.empty("O", (n, d))
        try:
            call_learner(fn, mem, n, d, br, bc)
        except LearnerError as err:
            return error_verdict(FLASH2_FORWARD_LOOP, err, where, quiet=quiet)
        rows = io_rows(mem.counters, expected_flash2_counters(n, d, br, 4))
        key, why, ev = diagnose_attention(mem.hbm("O"), q, k, v, causal=False, tol=1e-4, block_n=bc, block_m=br)
        if key != "passed":
            return verdict(FLASH2_FORWARD_LOOP, False, f"{why} ({where})", diagnosis=key, table=rows, quiet=quiet,
                           **ev)
        differ = io_differs(rows)
        if differ:
            by = {r[0]: r for r in rows}
            parts = [f"{t} {by[t][1]:,} B read / {by[t][2]:,} B written, FA2 moves {by[t][3]:,} / {by[t][4]:,}"
                     + (f" ({by[t][1] / by[t][3]:.3g}× the reads)" if by[t][3] and by[t][1] != by[t][3] else "")
                     for t in differ]
            key = "extra_reads_" + "_".join(differ)
            return verdict(FLASH2_FORWARD_LOOP, False, f"O is right but the bytes are not FA2's (✘ rows) at {where}: "
                           + "; ".join(parts) + ". Which loads happen more often than once per tile they need?",
                           diagnosis=key, table=rows, quiet=quiet)
    return verdict(FLASH2_FORWARD_LOOP, True, "O is exact and every tensor moved exactly FA2's bytes", table=rows,
                   quiet=quiet)


def fa1_reference_bytes(n: int, d: int, block_c: int, elem_bytes: int = 2) -> int:
    """FA1 (Algorithm 1) forward HBM bytes, from the simulator's flash1 count with the statistics in the storage
    dtype (FA1 §3.1; Fig. 2 middle counts this in fp16)."""
    dtype = {2: "fp16", 4: "fp32"}[elem_bytes]
    return traffic("flash1", n, d, block_r=min(16, block_c), block_c=block_c, dtype=dtype, stats_dtype=dtype,
                   device="a100", sram_bytes=1 << 30).hbm_bytes


def check_fa1_hbm_bytes(fn, quiet: bool = False) -> Verdict:
    """Exercise 05.3: against the simulator's Algorithm-1 count, on the paper's Fig. 2 sizes and on ragged N."""
    cases = [(1024, 64, 64, 2), (1024, 64, 256, 2), (1000, 64, 128, 2), (77, 16, 32, 4)]

    def tc(n, bc):
        return n_blocks(n, bc)
    suspects = (Suspect("floor_not_ceil", lambda n, d, bc, b: (2 * n * d + (n // bc) * (3 * n * d + 4 * n)) * b,
                        "your count uses N // Bc K/V blocks: the ragged last block is a pass too"),
                Suspect("stats_missing", lambda n, d, bc, b: (2 * n * d + tc(n, bc) * 3 * n * d) * b,
                        "your count leaves out the statistics ℓ and m, read and written on every pass"),
                Suspect("kv_per_pass", lambda n, d, bc, b: (2 * n * d * tc(n, bc) + tc(n, bc) * (3 * n * d + 4 * n)) * b,
                        "your count reads K and V on every pass: in Algorithm 1 each K/V block is loaded once"))
    return check_cases(FA1_HBM_BYTES, fn, cases, fa1_reference_bytes,
                       header=("N, d, Bc, b", "Algorithm 1's B", "your B"), suspects=suspects, quiet=quiet)
