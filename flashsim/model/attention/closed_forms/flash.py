"""Closed forms for FlashAttention's HBM traffic, FLOPs and SRAM peak (chapters 05, 07, 08).

Written from the algorithms' definitions with pencil and paper, independently of the loops in
:mod:`flashsim.model.attention.flash`; the tests check that step mode, count mode and these formulas agree exactly.
All counts are per head, in bytes: ``b`` = bytes of the storage dtype (Q, K, V, O, dO, dQ, dK, dV), ``bs`` = bytes
of the statistics dtype (m, l, logsumexp L, D). Requested bytes between HBM and SRAM, no L2 (docs/design.md).

Notation: Tr = ⌈N/Br⌉ row blocks of Q, Tc = ⌈N/Bc⌉ column blocks of K/V; the last block of each is ragged.

Without a mask every (i, j) tile is computed, so per-tile traffic sums to simple products:
  Σ over tiles of (rows of Q block i)  = N·Tc         Σ over tiles of (rows of K block j) = N·Tr
  Σ over tiles of rows·cols            = N²
Under a causal mask, row block i (rows i·Br … R_i, R_i = min((i+1)·Br, N) − 1) computes the J_i = ⌊R_i/Bc⌋ + 1
leftmost column blocks, which cover C_i = min(J_i·Bc, N) key rows. The same three sums become sums over row
blocks:  Σ_i r_i·J_i,  Σ_i C_i,  Σ_i r_i·C_i.

FA1's own count (§3.1, Fig. 2 middle) is :func:`fa1_paper_hbm_elements`: 2Nd + Tc·(3Nd + 4N) elements.
"""
from __future__ import annotations

from flashsim.model.attention.visibility import n_blocks, tile_sums

ACC_BYTES = 4  # fp32 on-chip tiles and accumulators


def _result(reads: dict, writes: dict, flops: int, sram: int, init: int) -> dict:
    reads = {k: int(v) for k, v in reads.items() if v}
    writes = {k: int(v) for k, v in writes.items() if v}
    return {
        "hbm_read_bytes": sum(reads.values()),
        "hbm_write_bytes": sum(writes.values()),
        "read_bytes_by_tensor": dict(sorted(reads.items())),
        "write_bytes_by_tensor": dict(sorted(writes.items())),
        "flops": int(flops),
        "sram_peak_bytes": int(sram),
        "init_write_bytes": int(init),
    }


# --- SRAM --------------------------------------------------------------------------------------------------------
def flash_sram_peak_bytes(algo: str, n: int, d: int, block_r: int, block_c: int, dtype_bytes: int,
                          stats_bytes: int, phase: str = "forward") -> int:
    """Bytes of the largest tile set one thread block holds (phase "forward", "backward" or "preprocess").

    r = min(Br, N), c = min(Bc, N): a block larger than N only ever holds N rows. f = 4 bytes (fp32 on chip).
    """
    r, c, b, bs, f = min(block_r, n), min(block_c, n), dtype_bytes, stats_bytes, ACC_BYTES
    if phase == "forward":
        if algo == "flash1":
            # Q_i, O_i (r·d) and K_j, V_j (c·d) in b; m_i, l_i in bs; S (r·c) and the O accumulator in fp32
            return (2 * r * d + 2 * c * d) * b + 2 * r * bs + (r * c + r * d) * f
        # Q_i, K_j, V_j in b; S, O accumulator and the running m, l in fp32
        return (r * d + 2 * c * d) * b + (r * c + r * d + 2 * r) * f
    if phase == "preprocess":
        return 2 * r * d * b + r * f  # O_i, dO_i; D_i in fp32
    if algo == "flash1":
        # K_j, V_j, Q_i, O_i, dO_i, dQ_i in b; m_i, l_i in bs; dK, dV accumulators, S/P, dP/dS, D_i in fp32
        return (2 * c * d + 4 * r * d) * b + 2 * r * bs + (2 * c * d + 2 * r * c + r) * f
    # K_j, V_j, Q_i, dO_i, dQ_i in b; L_i, D_i in bs; dK, dV accumulators, S/P, dP/dS in fp32
    return (2 * c * d + 3 * r * d) * b + 2 * r * bs + (2 * c * d + 2 * r * c) * f


# --- forward -----------------------------------------------------------------------------------------------------
def flash1_forward_bytes(n, d, block_r, block_c, dtype_bytes, stats_bytes, causal=False) -> dict:
    """FA1 Algorithm 1: outer loop over K/V blocks, O, l, m re-read and re-written per computed tile."""
    b, bs = dtype_bytes, stats_bytes
    tile_rows, _, tile_rc = tile_sums(n, block_r, block_c, causal)
    reads = {
        "K": n * d * b,  # reads K once: N·d elements
        "V": n * d * b,  # reads V once: N·d elements
        "Q": tile_rows * d * b,  # Q_i per computed tile: N·d·Tc elements without a mask
        "O": tile_rows * d * b,  # O_i per computed tile (the running output)
        "l": tile_rows * bs,  # l_i per computed tile: N·Tc elements without a mask
        "m": tile_rows * bs,  # m_i per computed tile
    }
    writes = {
        "O": tile_rows * d * b,  # O_i written back per computed tile
        "l": tile_rows * bs,
        "m": tile_rows * bs,
    }
    init = n * d * b + 2 * n * bs  # line 2: O = 0, l = 0, m = −inf, a memset outside the loop
    flops = 4 * d * tile_rc  # QKᵀ and PV: 2·r·c·d each per tile
    sram = flash_sram_peak_bytes("flash1", n, d, block_r, block_c, b, bs, "forward")
    return _result(reads, writes, flops, sram, init)


def flash2_forward_bytes(n, d, block_r, block_c, dtype_bytes, stats_bytes, causal=False) -> dict:
    """FA2: outer loop over Q blocks; Q_i read once, K_j and V_j per computed tile, O and L written once."""
    b, bs = dtype_bytes, stats_bytes
    _, tile_cols, tile_rc = tile_sums(n, block_r, block_c, causal)
    reads = {
        "Q": n * d * b,  # reads Q once: N·d elements
        "K": tile_cols * d * b,  # K_j per computed tile: Tr·N·d elements without a mask
        "V": tile_cols * d * b,  # V_j likewise
    }
    writes = {
        "O": n * d * b,  # O written once: N·d elements
        "L": n * bs,  # logsumexp written once: N elements
    }
    flops = 4 * d * tile_rc
    sram = flash_sram_peak_bytes("flash2", n, d, block_r, block_c, b, bs, "forward")
    return _result(reads, writes, flops, sram, 0)


# --- backward ----------------------------------------------------------------------------------------------------
def flash1_backward_bytes(n, d, block_r, block_c, dtype_bytes, stats_bytes, causal=False) -> dict:
    """FA1 Algorithm 4: outer loop over K/V blocks; per computed tile Q_i, O_i, dO_i, dQ_i, m_i, l_i read,
    D_i = rowsum(dO_i ∘ O_i) recomputed on chip, dQ_i written back; dK_j, dV_j written once."""
    b, bs = dtype_bytes, stats_bytes
    tile_rows, _, tile_rc = tile_sums(n, block_r, block_c, causal)
    reads = {
        "K": n * d * b,  # K, V once each
        "V": n * d * b,
        "Q": tile_rows * d * b,  # per computed tile: Q_i, O_i, dO_i, dQ_i (r·d each)
        "O": tile_rows * d * b,
        "dO": tile_rows * d * b,
        "dQ": tile_rows * d * b,
        "m": tile_rows * bs,  # and m_i, l_i (r each)
        "l": tile_rows * bs,
    }
    writes = {
        "dQ": tile_rows * d * b,  # dQ_i per computed tile
        "dK": n * d * b,  # dK, dV once each
        "dV": n * d * b,
    }
    flops = 10 * d * tile_rc  # S, dV, dP, dQ, dK: five r×c×d matmuls per tile
    sram = flash_sram_peak_bytes("flash1", n, d, block_r, block_c, b, bs, "backward")
    return _result(reads, writes, flops, sram, n * d * b)  # init: dQ = 0 before the loop


def flash2_backward_bytes(n, d, block_r, block_c, dtype_bytes, stats_bytes, causal=False) -> dict:
    """FA2 backward: a preprocess pass D = rowsum(dO ∘ O) (reads O, dO, writes D), then the Algorithm 4 loop reading
    Q_i, dO_i, dQ_i, L_i, D_i per computed tile."""
    b, bs = dtype_bytes, stats_bytes
    tile_rows, _, tile_rc = tile_sums(n, block_r, block_c, causal)
    reads = {
        "O": n * d * b,  # preprocess: O and dO once (N·d each)
        "K": n * d * b,  # main loop: K, V once each
        "V": n * d * b,
        "Q": tile_rows * d * b,  # per computed tile: Q_i, dO_i, dQ_i (r·d each), L_i, D_i (r each)
        "dO": n * d * b + tile_rows * d * b,
        "dQ": tile_rows * d * b,
        "L": tile_rows * bs,
        "D": tile_rows * bs,
    }
    writes = {
        "D": n * bs,  # preprocess writes D once: N elements
        "dQ": tile_rows * d * b,
        "dK": n * d * b,
        "dV": n * d * b,
    }
    flops = 10 * d * tile_rc
    sram = max(flash_sram_peak_bytes("flash2", n, d, block_r, block_c, b, bs, "preprocess"),
               flash_sram_peak_bytes("flash2", n, d, block_r, block_c, b, bs, "backward"))
    return _result(reads, writes, flops, sram, n * d * b)


# --- combined ----------------------------------------------------------------------------------------------------
def flash_bytes(algo: str, n: int, d: int, block_r: int, block_c: int, dtype_bytes: int, stats_bytes: int,
                causal: bool = False, backward: bool = False, heads: int = 1, batch: int = 1) -> dict:
    """The whole problem: forward (+ backward), bytes and FLOPs × batch × heads, peak SRAM the largest phase's.

    Same keys as :meth:`flashsim.model.memory.Counters.as_dict` (less reuse_bytes) plus ``init_write_bytes``.
    """
    fwd_fn = {"flash1": flash1_forward_bytes, "flash2": flash2_forward_bytes}[algo]
    parts = [fwd_fn(n, d, block_r, block_c, dtype_bytes, stats_bytes, causal)]
    if backward:
        bwd_fn = {"flash1": flash1_backward_bytes, "flash2": flash2_backward_bytes}[algo]
        parts.append(bwd_fn(n, d, block_r, block_c, dtype_bytes, stats_bytes, causal))
    reads, writes, bh = {}, {}, batch * heads
    for part in parts:
        for k, v in part["read_bytes_by_tensor"].items():
            reads[k] = reads.get(k, 0) + v * bh
        for k, v in part["write_bytes_by_tensor"].items():
            writes[k] = writes.get(k, 0) + v * bh
    return _result(reads, writes, sum(p["flops"] for p in parts) * bh,
                   max(p["sram_peak_bytes"] for p in parts), sum(p["init_write_bytes"] for p in parts) * bh)


def fa1_paper_hbm_elements(n: int, d: int, block_c: int) -> int:
    """FA1 §3.1's count for Algorithm 1: 2Nd + Tc·(3Nd + 4N) elements (K, V once; Q, O, l, m read and O, l, m
    written per column block). Equals flash1_forward_bytes(..., causal=False) summed, with b = bs = 1."""
    tc = n_blocks(n, block_c)
    return 2 * n * d + tc * (3 * n * d + 4 * n)
