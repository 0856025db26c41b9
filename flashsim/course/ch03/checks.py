"""Chapter 03 exercises: a tiled QKᵀ on the simulated memory, the paper's block-size rule, and what fits."""
from __future__ import annotations

from typing import Callable

import numpy as np

from flashsim.course.ch03.tiling import fa1_blocks, qkt_tile_set, tiled_qkt_bytes
from flashsim.course.kit.checker import (LearnerError, Suspect, Verdict, call_learner, check_cases, error_verdict,
                                         exercise, io_differs, io_rows, sram_overflow_verdict, verdict)
from flashsim.errors import SramCapacityError
from flashsim.model.dtypes import dtype_bytes, round_to
from flashsim.model.memory import Memory

__all__ = ["tiled_qkt_bytes", "qkt_tile_set", "check_tiled_qkt", "check_paper_blocks", "check_tile_fits"]

TILED_QKT = exercise(
    "03.1", "tiled QKᵀ",
    "fn(mem, n, d, block_r, block_c) computes S = Q Kᵀ on a Memory that holds Q and K (N×d) and an empty S (N×N) "
    "in HBM, with just enough SRAM for one Q block, one K block and one fp32 S tile, moving exactly the bytes of "
    "the chapter's tiled loop. N need not be a multiple of the blocks.",
    ("Which of the two operands do you keep on chip while the other streams past, and how many times is each "
     "loaded?",
     "mem.load / mem.store / mem.free, two loops (row blocks outside, column blocks inside), slices that stop at "
     "min(start + block, n).",
     "Load Q_i before the inner loop and free it after; inside, load K_j, store the S tile, free K_j. Every "
     "slice stops at min(start + block, n)."),
    "check_tiled_qkt")

PAPER_BLOCKS = exercise(
    "03.2", "the SRAM a block size needs",
    "fn(block_c, d, dtype) -> sram_bytes: the smallest SRAM, in bytes, for which FlashAttention-1's block-size "
    "rule (§3.1) picks a K/V block of at least block_c rows.",
    ("The paper's rule rounds up. Which values of M/4d all give the same Bc?",
     "The rule measures M in elements of the dtype, and a byte count that is not a whole number of elements loses "
     "its remainder. Find the smallest M (in elements) first.",
     "⌈x⌉ ≥ Bc exactly when x > Bc − 1: turn that into an inequality on M, take the smallest whole M, then "
     "convert elements to bytes"),
    "check_paper_blocks")

TILE_FITS = exercise(
    "03.3", "does the tile set fit?",
    "fn(block_r, block_c, d, dtype, sram_bytes) -> bool: does the tiled QKᵀ's tile set fit in sram_bytes?",
    ("Which tiles must be on chip at the same moment, and in which dtype is each kept?",
     "qkt_tile_set(...) lists them; the score tile is accumulated in fp32 whatever the storage dtype.",
     "Add the bytes of Q_i and K_j in the storage dtype to the score tile's bytes in fp32 and compare with "
     "sram_bytes (filling it exactly still fits)."),
    "check_tile_fits")


_QKT_CASES = [(16, 8, 4, 4, "fp16"), (18, 8, 4, 8, "fp16"), (32, 16, 8, 16, "fp32"), (20, 4, 16, 8, "fp16")]


def check_tiled_qkt(fn: Callable, quiet: bool = False) -> Verdict:
    """Exercise 03.1: S against Q Kᵀ (as the dtype stores it), and the bytes per tensor against
    :func:`tiled_qkt_bytes`."""
    for n, d, br, bc, dtype in _QKT_CASES:
        where = f"N={n}, d={d}, Br={br}, Bc={bc}, {dtype}"
        rng = np.random.default_rng(0)
        q, k = (rng.standard_normal((n, d)).astype(np.float32) for _ in range(2))
        mem = Memory(sram_capacity_bytes=sum(qkt_tile_set(br, bc, d, dtype).values()), dtype=dtype)
        mem.put("Q", q)
        mem.put("K", k)
        mem.empty("S", (n, n))
        want_b = tiled_qkt_bytes(n, d, br, bc, dtype)
        want = {"read_bytes_by_tensor": want_b["read"], "write_bytes_by_tensor": want_b["write"]}
        try:
            call_learner(fn, mem, n, d, br, bc)
        except LearnerError as err:
            if isinstance(err.original, SramCapacityError):
                return sram_overflow_verdict(TILED_QKT, err, mem, where, io_rows(mem.counters, want), quiet=quiet)
            return error_verdict(TILED_QKT, err, where, quiet=quiet)
        rows = io_rows(mem.counters, want)
        s = mem.hbm("S")
        ref = round_to(round_to(q, dtype) @ round_to(k, dtype).T, dtype)
        unwritten = ~np.isfinite(s)
        if unwritten.any():
            r0 = int(np.argmax(unwritten.any(axis=1)))
            ragged = "; N is not a multiple of the blocks here: is the last, partial block skipped?" if n % br or \
                n % bc else ""
            return verdict(TILED_QKT, False, f"{int(unwritten.sum())} elements of S were never written (from row "
                           f"{r0}) at {where}{ragged}", diagnosis="not_written", table=rows, quiet=quiet)
        tol = 1e-5 if dtype == "fp32" else 2e-2
        if not np.allclose(s, ref, rtol=tol, atol=tol * np.abs(ref).max()):
            if np.allclose(s.T, ref, rtol=tol, atol=tol * np.abs(ref).max()):
                key, how = "transposed", ("S equals K Qᵀ, the transpose: row r of S belongs to query r, so S_ij = "
                                          "Q_i K_jᵀ")
            else:
                key, how = "wrong_values", f"max |S − QKᵀ| = {float(np.abs(s - ref).max()):.3g}"
            return verdict(TILED_QKT, False, f"S is wrong at {where}: {how}", diagnosis=key, table=rows,
                           quiet=quiet)
        differ = io_differs(rows)
        if differ:
            got = {r[0]: r for r in rows}
            parts = []
            for t in differ:
                _, r, w, wr, ww = got[t]
                parts.append(f"{t} {r:,} B read / {w:,} B written, the tiled loop moves {wr:,} / {ww:,}"
                             + (f" ({r / wr:.3g}× the reads)" if wr and r != wr else ""))
            if got["S"][2] > got["S"][4]:
                key, why = "extra_stores_S", (": S is written more than once: store each S_ij once, when it is "
                                              "complete")
            elif got["Q"][1] > got["Q"][3] and got["K"][1] < got["K"][3]:
                key, why = "loop_order_swapped", (": Q is re-read for every K block and K read once: your outer "
                                                  "loop runs over K. The chapter's loop keeps the Q block resident "
                                                  "(outer loop over Q), which sets the re-reads by Br")
            elif differ == ["Q"] and got["Q"][1] > got["Q"][3]:
                key, why = "q_reloaded", ": Q_i is loaded again for every K tile, though it can stay on chip"
            elif any(got[t][1] < got[t][3] for t in ("Q", "K")):
                key, why = "reads_not_counted", (": fewer bytes than the loop needs: data read with mem.hbm(...) is "
                                                 "not a counted load; load every block with mem.load")
            else:
                key, why = "wrong_bytes", ""
            return verdict(TILED_QKT, False, f"S is right, but the bytes differ (✘ rows) at {where}: "
                           + "; ".join(parts) + why, diagnosis=key, table=rows, quiet=quiet)
    return verdict(TILED_QKT, True, "S and every tensor's bytes match the tiled loop on all cases (the table is the "
                   "last case's)", table=rows, quiet=quiet)


def _smallest_sram(block_c, d, dtype) -> int:
    """The smallest sram_bytes with fa1_blocks(sram_bytes, d, dtype)[1] >= block_c, by bisection on the rule."""
    lo, hi = 1, dtype_bytes(dtype)
    while fa1_blocks(hi, d, dtype)[1] < block_c:
        hi *= 2
    while lo < hi:
        mid = (lo + hi) // 2
        if fa1_blocks(mid, d, dtype)[1] >= block_c:
            hi = mid
        else:
            lo = mid + 1
    return lo


def check_paper_blocks(fn: Callable, quiet: bool = False) -> Verdict:
    """Exercise 03.2: the smallest SRAM the paper's rule (:func:`fa1_blocks`) turns into block_c, found by
    bisection on the rule itself."""
    cases = [(64, 64, "fp16"), (456, 64, "fp16"), (128, 128, "fp32"), (17, 16, "bf16"), (1, 48, "fp16"),
             (100, 80, "fp32")]
    b = dtype_bytes

    def smallest(bc, d, dt, per=4, extra=1):
        return (per * d * (bc - 1) + extra) * b(dt)
    suspects = (Suspect("bytes_not_elements", lambda bc, d, dt: smallest(bc, d, dt) // b(dt),
                        "your answer is the smallest M in elements: the spec asks for bytes, and M counts elements "
                        "of the dtype"),
                Suspect("not_smallest", lambda bc, d, dt: 4 * d * bc * b(dt),
                        "your SRAM gives M/4d = Bc exactly, but the rule rounds up: any M just above 4d·(Bc − 1) "
                        "already gives Bc"),
                Suspect("one_element_short", lambda bc, d, dt: smallest(bc, d, dt, extra=0),
                        "with your SRAM M/4d = Bc − 1 exactly, which rounds to Bc − 1: ⌈x⌉ reaches Bc only for "
                        "x > Bc − 1, one more element"),
                Suspect("quarter_missing", lambda bc, d, dt: smallest(bc, d, dt, per=1),
                        "your answer sizes one d-wide block of Bc rows: the rule divides M by 4d (K, V, Q and O "
                        "blocks)"),
                Suspect("fp32_assumed", lambda bc, d, dt: (4 * d * (bc - 1) + 1) * 4,
                        "your bytes use 4 bytes per element for every dtype: M counts elements of `dtype`"))
    return check_cases(PAPER_BLOCKS, fn, cases, _smallest_sram,
                       header=("Bc, d, dtype", "smallest SRAM B", "your SRAM B"), suspects=suspects, quiet=quiet)


def _fits_ref(block_r, block_c, d, dtype, sram_bytes):
    return sum(qkt_tile_set(block_r, block_c, d, dtype).values()) <= sram_bytes


def check_tile_fits(fn: Callable, quiet: bool = False) -> Verdict:
    """Exercise 03.3 (spec: ``exercises.hint("03.3")``)."""
    cases = [(64, 64, 64, "fp16", 228 * 1024), (128, 128, 128, "fp16", 100 * 1024), (128, 64, 64, "fp16", 48 * 1024),
             (128, 64, 64, "fp16", 64 * 1024), (256, 256, 64, "fp32", 228 * 1024), (16, 16, 16, "fp16", 2048),
             (16, 16, 16, "fp16", 2047), (64, 64, 64, "fp16", 20 * 1024), (16, 16, 16, "fp16", 800)]
    b = dtype_bytes
    suspects = (Suspect("s_tile_missing", lambda r, c, d, dt, s: (r * d + c * d) * b(dt) <= s,
                        "your answers fit the Q and K blocks only: the score tile is on chip too"),
                Suspect("s_in_storage_dtype", lambda r, c, d, dt, s: (r * d + c * d + r * c) * b(dt) <= s,
                        "your score tile is counted in the storage dtype: it is accumulated in fp32"),
                Suspect("strict", lambda r, c, d, dt, s: sum(qkt_tile_set(r, c, d, dt).values()) < s,
                        "exactly filling the SRAM counts as fitting"),
                Suspect("fa1_tile_set", lambda r, c, d, dt, s: (2 * r * d + 2 * c * d) * b(dt) + r * c * 4 <= s,
                        "your tile set adds V and O blocks: the tiled QKᵀ holds just Q_i, K_j and S_ij"),
                Suspect("elements_not_bytes", lambda r, c, d, dt, s: r * d + c * d + r * c <= s,
                        "your sizes count elements, and sram_bytes is in bytes: each element takes its dtype's "
                        "bytes (4 for the fp32 score tile)"))
    return check_cases(TILE_FITS, fn, cases, _fits_ref, header=("Br, Bc, d, dtype, SRAM", "expected", "yours"),
                       suspects=suspects, quiet=quiet)
