"""Chapter 03 exercises: a tiled QKᵀ on the simulated memory, the paper's block-size rule, and what fits."""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from flashsim.course.ch03.tiling import fa1_blocks, qkt_tile_set, tiled_qkt_bytes
from flashsim.course.kit.checker import (LearnerError, Suspect, Verdict, call_learner, check_cases, error_verdict,
                                         exercise, io_differs, io_rows, verdict)
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
     "reads Q once (N·d·b) and K once per row block (⌈N/Br⌉·N·d·b), writes S once (N²·b)"),
    "check_tiled_qkt")

PAPER_BLOCKS = exercise(
    "03.2", "the paper's block sizes",
    "fn(sram_bytes, d, dtype) -> (Br, Bc): FlashAttention-1's block-size rule (§3.1) for an SRAM of sram_bytes.",
    ("The paper measures the SRAM size M in what unit: bytes or elements?",
     "Bc fills a quarter of the SRAM with d-wide rows; Br may not exceed d. Round up.",
     "M = sram_bytes // dtype_bytes(dtype); Bc = ⌈M / 4d⌉; Br = min(Bc, d)"),
    "check_paper_blocks")

TILE_FITS = exercise(
    "03.3", "does the tile set fit?",
    "fn(block_r, block_c, d, dtype, sram_bytes) -> bool: does the tiled QKᵀ's tile set fit in sram_bytes?",
    ("Which tiles must be on chip at the same moment, and in which dtype is each kept?",
     "qkt_tile_set(...) lists them; the score tile is accumulated in fp32 whatever the storage dtype.",
     "Br·d·b + Bc·d·b + Br·Bc·4 <= sram_bytes"),
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
                return verdict(TILED_QKT, False, f"SRAM overflow at {where}: the tiles on chip outgrew the SRAM "
                               f"({err.original}). Which tiles are still held that you no longer need?",
                               diagnosis="sram_overflow", table=io_rows(mem.counters, want), quiet=quiet)
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
            how = "S equals Q Kᵀ transposed" if np.allclose(s.T, ref, rtol=tol, atol=tol * np.abs(ref).max()) else \
                f"max |S − QKᵀ| = {float(np.abs(s - ref).max()):.3g}"
            return verdict(TILED_QKT, False, f"S is wrong at {where}: {how}", diagnosis="wrong_values", table=rows,
                           quiet=quiet)
        differ = io_differs(rows)
        if differ:
            got = {r[0]: r for r in rows}
            parts = []
            for t in differ:
                _, r, w, wr, ww = got[t]
                parts.append(f"{t} {r:,} B read / {w:,} B written, the tiled loop moves {wr:,} / {ww:,}"
                             + (f" ({r / wr:.3g}× the reads)" if wr and r != wr else ""))
            key = "q_reloaded" if differ == ["Q"] and got["Q"][1] > got["Q"][3] else "wrong_bytes"
            why = (": Q_i is loaded again for every K tile, though it can stay on chip" if key == "q_reloaded" else "")
            return verdict(TILED_QKT, False, f"S is right, but the bytes differ (✘ rows) at {where}: "
                           + "; ".join(parts) + why, diagnosis=key, table=rows, quiet=quiet)
    return verdict(TILED_QKT, True, "S and every tensor's bytes match the tiled loop on all cases (the table is the "
                   "last case's)", table=rows, quiet=quiet)


def check_paper_blocks(fn: Callable, quiet: bool = False) -> Verdict:
    """Exercise 03.2 (spec: ``exercises.hint("03.2")``)."""
    cases = [(228 * 1024, 64, "fp16"), (164 * 1024, 128, "fp16"), (100 * 1024, 64, "fp32"), (64 * 1024, 256, "fp16"),
             (1000, 16, "fp16"), (4096, 64, "fp32"), (1000, 48, "fp16")]

    def floor(s, d, dt):
        bc = s // dtype_bytes(dt) // (4 * d)
        return (min(bc, d), bc)

    def in_bytes(s, d, dt):
        bc = math.ceil(s / (4 * d))
        return (min(bc, d), bc)
    suspects = (Suspect("floor_not_ceil", floor, "your blocks are rounded down where the paper rounds up"),
                Suspect("bytes_not_elements", in_bytes, "your M is in bytes: the paper's M counts elements of the "
                        "dtype"),
                Suspect("br_not_capped", lambda s, d, dt: (fa1_blocks(s, d, dt)[1],) * 2,
                        "your Br equals Bc even where Bc exceeds d: the paper caps Br"))
    return check_cases(PAPER_BLOCKS, fn, cases, fa1_blocks,
                       header=("SRAM bytes, d, dtype", "expected (Br, Bc)", "your (Br, Bc)"), suspects=suspects,
                       quiet=quiet)


def _fits_ref(block_r, block_c, d, dtype, sram_bytes):
    return sum(qkt_tile_set(block_r, block_c, d, dtype).values()) <= sram_bytes


def check_tile_fits(fn: Callable, quiet: bool = False) -> Verdict:
    """Exercise 03.3 (spec: ``exercises.hint("03.3")``)."""
    cases = [(64, 64, 64, "fp16", 228 * 1024), (128, 128, 128, "fp16", 100 * 1024), (128, 64, 64, "fp16", 48 * 1024),
             (128, 64, 64, "fp16", 64 * 1024), (256, 256, 64, "fp32", 228 * 1024), (16, 16, 16, "fp16", 2048),
             (16, 16, 16, "fp16", 2047), (64, 64, 64, "fp16", 20 * 1024)]
    b = dtype_bytes
    suspects = (Suspect("s_tile_missing", lambda r, c, d, dt, s: (r * d + c * d) * b(dt) <= s,
                        "your answers fit the Q and K blocks only: the score tile is on chip too"),
                Suspect("s_in_storage_dtype", lambda r, c, d, dt, s: (r * d + c * d + r * c) * b(dt) <= s,
                        "your score tile is counted in the storage dtype: it is accumulated in fp32"),
                Suspect("strict", lambda r, c, d, dt, s: sum(qkt_tile_set(r, c, d, dt).values()) < s,
                        "exactly filling the SRAM counts as fitting"))
    return check_cases(TILE_FITS, fn, cases, _fits_ref, header=("Br, Bc, d, dtype, SRAM", "expected", "yours"),
                       suspects=suspects, quiet=quiet)
