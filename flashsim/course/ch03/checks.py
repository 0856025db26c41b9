"""Chapter 03 exercises: a tiled QKᵀ on the simulated memory, the paper's block-size rule, and what fits."""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from flashsim.course import Table
from flashsim.model.dtypes import dtype_bytes, round_to
from flashsim.errors import SramCapacityError
from flashsim.model.memory import Memory
from flashsim.course.ch00.checks import Verdict, run_cases

__all__ = ["tiled_qkt_bytes", "qkt_tile_set", "check_tiled_qkt", "check_paper_blocks", "check_tile_fits"]


def tiled_qkt_bytes(n: int, d: int, block_r: int, block_c: int, dtype: str = "fp16") -> dict:
    """HBM bytes of the tiled S = QKᵀ of chapter 03 (Q_i kept in SRAM while every K_j streams past):
    {"read": {"Q": N·d·b, "K": Tr·N·d·b}, "write": {"S": N²·b}}. Bc does not appear: only the resident block
    sets how often the streamed operand is re-read."""
    b = dtype_bytes(dtype)
    tr = -(-n // block_r)
    return {"read": {"Q": n * d * b, "K": tr * n * d * b}, "write": {"S": n * n * b}}


def qkt_tile_set(block_r: int, block_c: int, d: int, dtype: str = "fp16") -> dict:
    """SRAM the tiled QKᵀ of chapter 03 holds at once: Q_i and K_j in the storage dtype, the S_ij accumulator in fp32."""
    b = dtype_bytes(dtype)
    return {"Q_i": block_r * d * b, "K_j": block_c * d * b, "S_ij (fp32)": block_r * block_c * 4}


# --- exercise 1: the tiled loop -------------------------------------------------------------------------------

_QKT_CASES = [(16, 8, 4, 4, "fp16"), (18, 8, 4, 8, "fp16"), (32, 16, 8, 16, "fp32"), (20, 4, 16, 8, "fp16")]


def _run_one(fn, n, d, br, bc, dtype, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n, d)).astype(np.float32)
    k = rng.standard_normal((n, d)).astype(np.float32)
    sram = sum(qkt_tile_set(br, bc, d, dtype).values())
    mem = Memory(sram_capacity_bytes=sram, dtype=dtype)
    mem.put("Q", q)
    mem.put("K", k)
    mem.empty("S", (n, n))
    fn(mem, n, d, br, bc)
    want = round_to(round_to(q, dtype) @ round_to(k, dtype).T, dtype)
    return mem, want


def check_tiled_qkt(fn: Callable, quiet: bool = False) -> Verdict:
    """Exercise 03.1: ``fn(mem, n, d, block_r, block_c)`` computes S = QKᵀ on a :class:`flashsim.model.memory.Memory`
    that holds Q and K (N×d) and an empty S (N×N) in HBM, with exactly enough SRAM for one Q_i, one K_j and an
    fp32 S_ij. Loop over row blocks i (load Q_i once), then column blocks j (load K_j, compute, store S_ij);
    handle a ragged last block. Checked: S equals QKᵀ (as the dtype stores it) and the bytes read and written per
    tensor equal :func:`tiled_qkt_bytes`."""
    name = "check_tiled_qkt"
    rows, problem = [], None
    for n, d, br, bc, dtype in _QKT_CASES:
        label = f"N={n}, d={d}, Br={br}, Bc={bc}, {dtype}"
        want = tiled_qkt_bytes(n, d, br, bc, dtype)
        try:
            mem, ref = _run_one(fn, n, d, br, bc, dtype)
        except NotImplementedError:
            v = Verdict(name, False, "not implemented yet: fill in the stub (the hint says how)")
            return v if quiet else v.show()
        except SramCapacityError as exc:
            problem = problem or f"{label}: SRAM overflow — free tiles you no longer need ({exc})"
            rows.append([label, "—", "—", "—", "—", "✘"])
            continue
        except Exception as exc:
            problem = problem or f"{label}: {type(exc).__name__}: {exc}"
            rows.append([label, "—", "—", "—", "—", "✘"])
            continue
        got_r = {k: v for k, v in mem.counters.read_bytes_by_tensor.items() if v}
        got_w = {k: v for k, v in mem.counters.write_bytes_by_tensor.items() if v}
        s = mem.hbm("S")
        tol = 1e-5 if dtype == "fp32" else 2e-2
        values_ok = bool(np.all(np.isfinite(s))) and np.allclose(s, ref, rtol=tol, atol=tol * np.abs(ref).max())
        bytes_ok = got_r == want["read"] and got_w == want["write"]
        fmt = lambda dct: ", ".join(f"{k} {v:,}" for k, v in sorted(dct.items()))  # noqa: E731
        rows.append([label, fmt(want["read"]), fmt(got_r), fmt(want["write"]), fmt(got_w),
                     "✔" if values_ok and bytes_ok else "✘"])
        if not values_ok and problem is None:
            missing = int(np.isnan(s).sum())
            problem = (f"{label}: S is wrong" + (f" ({missing} elements never written — is the last block "
                                                 "skipped?)" if missing else ""))
        elif not bytes_ok and problem is None:
            problem = (f"{label}: bytes read {fmt(got_r)} / written {fmt(got_w)}, expected {fmt(want['read'])} / "
                       f"{fmt(want['write'])} — load Q_i once per row block and K_j once per tile")
    table = Table(["case", "expected reads (B)", "your reads (B)", "expected writes (B)", "your writes (B)", "ok"],
                  rows)
    v = Verdict(name, problem is None, "S and every byte count match" if problem is None else problem, table)
    return v if quiet else v.show()


# --- exercise 2: the paper's block sizes ---------------------------------------------------------------------

def _paper_ref(sram_bytes, d, dtype):
    m = sram_bytes // dtype_bytes(dtype)
    bc = math.ceil(m / (4 * d))
    return (min(bc, d), bc)


def check_paper_blocks(fn: Callable, quiet: bool = False) -> Verdict:
    """Exercise 03.2: ``fn(sram_bytes, d, dtype) -> (Br, Bc)``, FA1 §3.1's rule with M the SRAM size in elements
    of the dtype: Bc = ⌈M / 4d⌉, Br = min(Bc, d)."""
    cases = [(228 * 1024, 64, "fp16"), (164 * 1024, 128, "fp16"), (100 * 1024, 64, "fp32"), (64 * 1024, 256, "fp16"),
             (1000, 16, "fp16"), (4096, 64, "fp32")]
    return run_cases("check_paper_blocks", fn, cases, _paper_ref,
                     header=("SRAM bytes, d, dtype", "expected (Br, Bc)", "your (Br, Bc)"),
                     hint="M = sram_bytes // dtype_bytes(dtype); Bc = ceil(M / (4 d)); Br = min(Bc, d)",
                     quiet=quiet)


# --- exercise 3: does the tile set fit? -----------------------------------------------------------------------

def _fits_ref(block_r, block_c, d, dtype, sram_bytes):
    return sum(qkt_tile_set(block_r, block_c, d, dtype).values()) <= sram_bytes


def check_tile_fits(fn: Callable, quiet: bool = False) -> Verdict:
    """Exercise 03.3: ``fn(block_r, block_c, d, dtype, sram_bytes) -> bool``: does the tiled QKᵀ's tile set
    (Q_i and K_j in the dtype, S_ij accumulated in fp32) fit in `sram_bytes`?"""
    cases = [(64, 64, 64, "fp16", 228 * 1024), (128, 128, 128, "fp16", 100 * 1024), (128, 64, 64, "fp16", 48 * 1024),
             (128, 64, 64, "fp16", 64 * 1024), (256, 256, 64, "fp32", 228 * 1024), (16, 16, 16, "fp16", 2048),
             (16, 16, 16, "fp16", 2047)]
    return run_cases("check_tile_fits", fn, cases, _fits_ref,
                     header=("Br, Bc, d, dtype, SRAM", "expected", "yours"),
                     hint="Br·d·b + Bc·d·b + Br·Bc·4 <= sram_bytes — the S tile counts too", quiet=quiet)
