"""FlashAttention on the simulated memory hierarchy: FA1 and FA2 loop orders, backward, causal, ragged N
(chapters 05, 07 and 08).

Attention O = softmax(τ·QKᵀ)·V with τ = 1/√d never needs the N×N matrix S in HBM: split Q into row blocks of
``block_r`` (Br) rows and K, V into column blocks of ``block_c`` (Bc) rows, keep one S tile (Br×Bc) in SRAM at a
time, and carry the online-softmax statistics m (row max) and l (denominator) from tile to tile
(:mod:`flashsim.model.attention.online_softmax`). The two papers differ in the *loop order*, and that changes the bytes:

- **flash1** (FA1, Algorithm 1): outer loop over K/V blocks j, inner over Q blocks i. Each inner step re-reads
  Q_i, O_i, l_i, m_i from HBM and writes O_i, l_i, m_i back: Tc·(3Nd + 4N) elements, plus 2Nd for K and V.
- **flash2** (FA2): outer loop over Q blocks i. Q_i, the O accumulator and m, l stay on chip for the whole row
  block; O_i is written once, with the logsumexp L_i = m_i + log l_i for the backward.
- **backward** (FA1 Algorithm 4 / FA2): recompute S and P tile by tile from Q, K and the saved statistics instead of
  reading an N×N P. Outer loop over K/V blocks j (dK_j, dV_j accumulate on chip), inner over Q blocks i (dQ_i is
  read, updated and written back per tile). flash1 recomputes D_i = rowsum(dO_i ∘ O_i) per tile from O_i;
  flash2 runs a preprocess pass that writes D once, then reads L_i and D_i per tile.
- **causal** (query row r sees key columns c ≤ r): tile (i, j) is skipped (no loads, no FLOPs) when every column
  of it lies right of every row, i.e. j·Bc > min((i+1)·Br, N) − 1; a tile the diagonal crosses is computed and
  masked element-wise.
- **ragged N**: the last block has N − (T−1)·B rows; loads and stores count only real rows.

Each algorithm runs in two modes with identical :class:`~flashsim.model.memory.Counters`:

- *step mode* (:func:`run_flash`): real numbers through :class:`~flashsim.model.memory.Memory`, one Event per load,
  store, compute and free, with tile indices, bytes and the running m and l (and the O rows) of the row block.
  Storage dtypes fp32/fp16/bf16 are emulated by rounding on store; every tile computation is fp32. No N×N array
  is ever built. The result is exact in real arithmetic, not bitwise equal to a float64 computation.
- *count mode* (:func:`count_flash`): the same loop structure, vectorized over the outer loop index, no numbers.

The closed forms in :mod:`flashsim.model.attention.closed_forms.flash` are derived separately; the tests check all three agree.

Two conventions worth knowing (docs/design.md):

- Initialising O, l, m in HBM before FA1's loop (Algorithm 1, line 2) and zeroing dQ before the backward loop are
  memsets outside the loop: reported as ``init_write_bytes``, not in ``hbm_write_bytes`` (FA1's Fig. 2 excludes
  them: 6.85 GB at Bc = 64).
- Dropout, when asked for, is regenerated on chip from an RNG seed (as in the FlashAttention kernels): it moves no
  HBM bytes, and step mode runs without it.

>>> from flashsim.model.problem import make_problem
>>> p = make_problem("flash1", n=1024, d=64, block_c=64, dtype="fp16", stats_dtype="fp16", sram_bytes=1 << 20)
>>> count_flash(p).counters.hbm_bytes == (2 * 1024 * 64 + 16 * (3 * 1024 * 64 + 4 * 1024)) * 2
True
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from flashsim.model.dtypes import canonical_dtype, dtype_bytes, round_to
from flashsim.errors import FlashsimError
from flashsim.model.blas import single_blas_thread
from flashsim.model.memory import Counters, Memory, check_host_budget, check_tile_set_fits, largest_fitting_block

__all__ = ["FlashCount", "FlashRun", "count_flash", "reference_attention", "reference_attention_grads",
           "resolve_blocks", "run_flash", "softmax_scale", "sram_peak_bytes", "sram_tile_bytes", "step_host_bytes"]

FLASH_ALGOS = ("flash1", "flash2")
ACC_BYTES = 4  # fp32: S/P tiles, accumulators and the running m, l are fp32 on chip

#: step mode keeps the O rows of the row block in each compute Event only while their total stays under this
EVENT_O_BUDGET_BYTES = 64 * 1024**2


def softmax_scale(d: int) -> float:
    """τ = 1/√d, the scale of QKᵀ."""
    return 1.0 / math.sqrt(d)


# ---------------------------------------------------------------------------------------------------------------
# The on-chip tile set: defined once, used by the capacity check, count mode and (via Memory) step mode
# ---------------------------------------------------------------------------------------------------------------
def sram_tile_bytes(block_r: int, block_c: int, d: int, dtype="fp16", stats_dtype="fp32", algo: str = "flash2",
                    backward: bool = False, *, phase: str | None = None) -> dict:
    """The SRAM tiles one thread block holds at once, name → bytes (chapter 05).

    Tiles loaded from HBM keep their storage dtype (b bytes, bs for statistics); on-chip intermediates are fp32:
    the S/P tile (Br×Bc), the O accumulator (Br×d) and flash2's running m, l; in the backward the dP/dS tile and
    the dK, dV accumulators (Bc×d).

    phase: "forward", "backward" (the main loop) or "preprocess" (flash2's D = rowsum(dO∘O) pass); default
    "backward" if `backward` else "forward".
    """
    algo = _check_algo(algo)
    phase = phase or ("backward" if backward else "forward")
    b, bs, f = dtype_bytes(dtype), dtype_bytes(stats_dtype), ACC_BYTES
    br, bc = int(block_r), int(block_c)
    if phase == "forward":
        tiles = {"Q_i": br * d * b, "K_j": bc * d * b, "V_j": bc * d * b}
        if algo == "flash1":  # O_i, l_i, m_i come from HBM (storage dtype) and go back there
            tiles.update({"O_i": br * d * b, "m_i": br * bs, "l_i": br * bs})
        else:  # flash2: running m, l live on chip in fp32 for the whole row block
            tiles.update({"m_i": br * f, "l_i": br * f})
        tiles.update({"S_ij": br * bc * f, "O_acc": br * d * f})
    elif phase == "backward":
        tiles = {"K_j": bc * d * b, "V_j": bc * d * b, "dK_acc": bc * d * f, "dV_acc": bc * d * f,
                 "Q_i": br * d * b}
        if algo == "flash1":  # Algorithm 4: O_i, m_i, l_i re-read per tile, D_i recomputed on chip
            tiles.update({"O_i": br * d * b, "dO_i": br * d * b, "dQ_i": br * d * b, "m_i": br * bs,
                          "l_i": br * bs, "D_i": br * f})
        else:  # FA2: logsumexp L_i and D_i (from the preprocess pass) read per tile
            tiles.update({"dO_i": br * d * b, "dQ_i": br * d * b, "L_i": br * bs, "D_i": br * bs})
        tiles.update({"S_ij": br * bc * f, "dP_ij": br * bc * f})
    elif phase == "preprocess":
        if algo != "flash2":
            raise FlashsimError("only flash2 has a preprocess phase (D = rowsum(dO∘O)); flash1 computes D per tile")
        tiles = {"O_i": br * d * b, "dO_i": br * d * b, "D_i": br * f}
    else:
        raise FlashsimError(f"unknown phase {phase!r}: use 'forward', 'backward' or 'preprocess'")
    return tiles


def _phases(algo: str, backward: bool) -> list[str]:
    if not backward:
        return ["forward"]
    return ["forward", "preprocess", "backward"] if algo == "flash2" else ["forward", "backward"]


def sram_peak_bytes(block_r: int, block_c: int, d: int, dtype="fp16", stats_dtype="fp32", algo: str = "flash2",
                    backward: bool = False) -> int:
    """Largest tile-set total over the phases that run (forward, and preprocess/backward when asked)."""
    return max(sum(sram_tile_bytes(block_r, block_c, d, dtype, stats_dtype, algo, phase=ph).values())
               for ph in _phases(_check_algo(algo), backward))


def _check_algo(algo: str) -> str:
    algo = str(algo).lower()
    if algo not in FLASH_ALGOS:
        raise FlashsimError(f"unknown flash algo {algo!r}: use one of {list(FLASH_ALGOS)}")
    return algo


def _check_fits(problem, block_r: int, block_c: int) -> None:
    """Raise SramCapacityError naming bytes needed, available and the largest block that would fit."""
    cap = problem.sram_bytes
    args = (problem.d, problem.dtype, problem.stats_dtype, problem.algo)
    for ph in _phases(problem.algo, problem.backward):
        tiles = sram_tile_bytes(block_r, block_c, *args, phase=ph)
        if sum(tiles.values()) <= cap:
            continue
        best_c = largest_fitting_block(
            lambda c: sum(sram_tile_bytes(block_r, c, *args, phase=ph).values()), cap, start=_pow2_floor(block_c))
        best_sq = largest_fitting_block(lambda s: sum(sram_tile_bytes(s, s, *args, phase=ph).values()), cap,
                                        start=_pow2_floor(max(block_r, block_c)))
        fixes = []
        if best_c:
            fixes.append(f"use block_c ≤ {best_c} (with block_r={block_r})")
        if best_sq:
            fixes.append(f"block_r = block_c ≤ {best_sq}")
        fix = " or ".join(fixes) or f"d={problem.d} is too large for this SRAM even with 1×1 blocks"
        try:
            check_tile_set_fits(tiles, cap, device_name=problem.hardware.name, fix=fix)
        except FlashsimError as e:
            raise type(e)(f"{problem.algo} {ph}, block {block_r}×{block_c} (block_r×block_c), d={problem.d}, "
                          f"{problem.dtype}: {e} [{sum(tiles.values())} bytes needed, {cap} available]") from None


def resolve_blocks(problem) -> tuple[int, int]:
    """(block_r, block_c) for a flash problem: explicit blocks are checked against SRAM, None gets FA1's rule.

    FA1 §3.1: Bc = ⌈M/(4d)⌉, Br = min(Bc, d), with M the SRAM size in elements of the storage dtype. Each is then
    rounded down to a power of two, clipped to N, and halved (the larger first) until every phase's tile set fits.
    A block given explicitly is kept as given (a block larger than N simply makes one ragged block); if its tile
    set does not fit, SramCapacityError says by how much and which block would.
    """
    _check_algo(problem.algo)
    n, d = problem.n, problem.d
    br, bc = problem.block_r, problem.block_c
    for name, val in (("block_r", br), ("block_c", bc)):
        if val is not None and (isinstance(val, bool) or int(val) != val or val <= 0):
            raise FlashsimError(f"{name}={val!r} must be a positive integer, e.g. {name}=64")
    cap = problem.sram_bytes
    args = (d, problem.dtype, problem.stats_dtype, problem.algo)

    def fits(r, c):
        return all(sum(sram_tile_bytes(r, c, *args, phase=ph).values()) <= cap
                   for ph in _phases(problem.algo, problem.backward))

    if br is None or bc is None:
        m_elems = cap // problem.elem_bytes  # M: SRAM size in elements of the storage dtype
        paper_c = max(-(-m_elems // (4 * d)), 1)  # Bc = ⌈M/(4d)⌉
        paper_r = min(paper_c, d)  # Br = min(⌈M/(4d)⌉, d)
        auto_c, auto_r = bc is None, br is None
        if auto_c:
            bc = min(_pow2_floor(paper_c), n)
        if auto_r:
            br = min(_pow2_floor(paper_r), n)
        while not fits(br, bc):  # halve what was not given explicitly, the larger first
            if auto_c and bc > 1 and (bc >= br or not auto_r or br == 1):
                bc //= 2
            elif auto_r and br > 1:
                br //= 2
            else:
                break  # cannot shrink further: _check_fits explains
    br, bc = int(br), int(bc)
    _check_fits(problem, br, bc)
    return br, bc


def _pow2_floor(x: int) -> int:
    return 1 << (int(x).bit_length() - 1) if x >= 1 else 1


# ---------------------------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------------------------
@dataclass
class FlashCount:
    """Count-mode result. Counters cover all heads (bytes and FLOPs × heads; peak SRAM is per thread block)."""

    problem: object
    block_r: int
    block_c: int
    counters: Counters  # forward (+ backward), all heads
    forward: Counters
    backward: Counters | None
    init_write_bytes: int  # memsets outside the loops (flash1's O, l, m; dQ before a backward), all heads
    sram_tiles: dict = field(default_factory=dict)  # the tile set of the largest phase, name → bytes

    @property
    def hbm_read_bytes(self) -> int:
        return self.counters.hbm_read_bytes

    @property
    def hbm_write_bytes(self) -> int:
        return self.counters.hbm_write_bytes

    @property
    def flops(self) -> int:
        return self.counters.flops

    @property
    def sram_peak_bytes(self) -> int:
        return self.counters.sram_peak_bytes


@dataclass
class FlashRun(FlashCount):
    """Step-mode result: the counters plus the numbers, and head 0's Memory with its Event log."""

    out: np.ndarray | None = None  # (heads, N, d) float32, as stored in HBM (rounded to the storage dtype)
    lse: np.ndarray | None = None  # (heads, N) float32 logsumexp m + log l
    grads: tuple | None = None  # (dq, dk, dv), each (heads, N, d) float32, when backward
    memory: Memory | None = None  # head 0


# ---------------------------------------------------------------------------------------------------------------
# Geometry shared by both modes
# ---------------------------------------------------------------------------------------------------------------
def _n_blocks(n: int, block: int) -> int:
    return -(-n // block)


def _sizes(n: int, block: int) -> np.ndarray:
    """Rows of each block: block, ..., block, N − (T−1)·block."""
    t = _n_blocks(n, block)
    return np.minimum(block, n - block * np.arange(t, dtype=np.int64))


def _visible_cols(n: int, br: int, bc: int, i: int, causal: bool) -> int:
    """Number of K/V blocks row block i computes: all Tc, or under causal those with j·Bc ≤ last row of block i."""
    tc = _n_blocks(n, bc)
    if not causal:
        return tc
    last_row = min((i + 1) * br, n) - 1
    return min(last_row // bc + 1, tc)


def _first_visible_row_block(br: int, bc: int, j: int, causal: bool) -> int:
    """First Q block i that sees K/V block j: under causal the first with (i+1)·Br − 1 ≥ j·Bc."""
    return (j * bc) // br if causal else 0


# ---------------------------------------------------------------------------------------------------------------
# Count mode
# ---------------------------------------------------------------------------------------------------------------
def _count_forward(algo, n, d, br, bc, b, bs, causal) -> tuple[Counters, int]:
    c = Counters()
    if algo == "flash2":
        # outer loop over row blocks i, vectorized: block i reads Q_i once and K_j, V_j for its visible j
        tr = _n_blocks(n, br)
        i = np.arange(tr, dtype=np.int64)
        rows = _sizes(n, br)  # (Tr,)
        if causal:
            last_row = np.minimum((i + 1) * br, n) - 1
            n_vis = np.minimum(last_row // bc + 1, _n_blocks(n, bc))
        else:
            n_vis = np.full(tr, _n_blocks(n, bc), np.int64)
        cols = np.minimum(n_vis * bc, n)  # key rows block i sees: visible blocks are j = 0 .. n_vis−1
        c.add_read("Q", int(rows.sum()) * d * b)
        c.add_read("K", int(cols.sum()) * d * b)
        c.add_read("V", int(cols.sum()) * d * b)
        c.add_write("O", int(rows.sum()) * d * b)
        c.add_write("L", int(rows.sum()) * bs)
        c.flops = int(4 * d * int((rows * cols).sum()))
        return c, 0
    # flash1: outer loop over K/V blocks j, vectorized: block j reads K_j, V_j, then every visible row block
    # i ≥ i_first(j) reads Q_i, O_i, l_i, m_i and writes O_i, l_i, m_i
    tc = _n_blocks(n, bc)
    j = np.arange(tc, dtype=np.int64)
    cols = _sizes(n, bc)  # (Tc,)
    first = (j * bc) // br if causal else np.zeros(tc, np.int64)
    vis_rows = n - first * br  # rows of Q the visible tiles of column block j cover
    rows_total = int(vis_rows.sum())
    c.add_read("K", int(cols.sum()) * d * b)
    c.add_read("V", int(cols.sum()) * d * b)
    for name, per_row in (("Q", d * b), ("O", d * b), ("l", bs), ("m", bs)):
        c.add_read(name, rows_total * per_row)
    for name, per_row in (("O", d * b), ("l", bs), ("m", bs)):
        c.add_write(name, rows_total * per_row)
    c.flops = int(4 * d * int((cols * vis_rows).sum()))
    init = n * d * b + 2 * n * bs  # memset of O, l, m before the loop
    return c, init


def _count_backward(algo, n, d, br, bc, b, bs, causal) -> tuple[Counters, int]:
    c = Counters()
    if algo == "flash2":  # preprocess pass: D_i = rowsum(dO_i ∘ O_i), written once
        c.add_read("O", n * d * b)
        c.add_read("dO", n * d * b)
        c.add_write("D", n * bs)
    tc = _n_blocks(n, bc)
    j = np.arange(tc, dtype=np.int64)
    cols = _sizes(n, bc)
    first = (j * bc) // br if causal else np.zeros(tc, np.int64)
    vis_rows = n - first * br
    rows_total = int(vis_rows.sum())
    c.add_read("K", int(cols.sum()) * d * b)
    c.add_read("V", int(cols.sum()) * d * b)
    per_tile = [("Q", d * b), ("dO", d * b), ("dQ", d * b)]
    per_tile += [("O", d * b), ("m", bs), ("l", bs)] if algo == "flash1" else [("L", bs), ("D", bs)]
    for name, per_row in per_tile:
        c.add_read(name, rows_total * per_row)
    c.add_write("dQ", rows_total * d * b)
    c.add_write("dK", int(cols.sum()) * d * b)
    c.add_write("dV", int(cols.sum()) * d * b)
    c.flops = int(10 * d * int((cols * vis_rows).sum()))
    return c, n * d * b  # dQ zeroed before the loop


def _effective_peak(problem, br, bc, phases=None) -> tuple[int, dict]:
    """Peak SRAM over `phases` (default: all that run): the largest tile set at the sizes actually loaded (a block
    larger than N holds only N rows)."""
    r, c = min(br, problem.n), min(bc, problem.n)
    best, best_tiles = -1, {}
    for ph in phases or _phases(problem.algo, problem.backward):
        tiles = sram_tile_bytes(r, c, problem.d, problem.dtype, problem.stats_dtype, problem.algo, phase=ph)
        if sum(tiles.values()) > best:
            best, best_tiles = sum(tiles.values()), tiles
    return best, best_tiles


def count_flash(problem) -> FlashCount:
    """Count mode: the counters of flash1/flash2 (forward, + backward if asked) without any numbers.

    Vectorized over the outer loop index (no Python loop over tiles): flash2 N=65536, d=128, Br=Bc=64 takes well
    under a millisecond.
    """
    br, bc = resolve_blocks(problem)
    n, d, b, bs = problem.n, problem.d, problem.elem_bytes, problem.stats_bytes
    _, tiles = _effective_peak(problem, br, bc)
    fwd, init = _count_forward(problem.algo, n, d, br, bc, b, bs, problem.causal)
    fwd.sram_peak_bytes = _effective_peak(problem, br, bc, ["forward"])[0]
    bwd = None
    if problem.backward:
        bwd, init_b = _count_backward(problem.algo, n, d, br, bc, b, bs, problem.causal)
        bwd.sram_peak_bytes = _effective_peak(problem, br, bc, _phases(problem.algo, True)[1:])[0]
        init += init_b
    h = problem.heads
    fwd_h = fwd * h
    bwd_h = bwd * h if bwd is not None else None
    total = fwd_h + bwd_h if bwd_h is not None else fwd_h * 1
    return FlashCount(problem, br, bc, total, fwd_h, bwd_h, init * h, tiles)


# ---------------------------------------------------------------------------------------------------------------
# Step mode
# ---------------------------------------------------------------------------------------------------------------
def _round_up(x: np.ndarray, dtype: str) -> np.ndarray:
    """Round to `dtype` toward +inf. A stored max m that is ≥ the true max keeps e^(S − m) ≤ 1."""
    dtype = canonical_dtype(dtype)
    x = np.asarray(x, np.float32)
    r = round_to(x, dtype)
    low = r < x
    if not low.any() or dtype == "fp32":
        return r
    if dtype == "fp16":
        up = np.nextafter(r.astype(np.float16), np.float16(np.inf)).astype(np.float32)
    else:  # bf16: step the top 16 bits by one unit toward +inf
        bits = r.view(np.uint32).astype(np.int64)
        neg = (bits >> 31) & 1
        step = np.where(neg == 1, -0x10000, 0x10000)
        bits = np.where((neg == 1) & ((bits & 0x7FFFFFFF) == 0), 0, bits)  # -0.0 → +0.0 first
        up = (bits + np.where((bits & 0x7FFFFFFF) == 0, 0x10000, step)).astype(np.uint32).view(np.float32)
    return np.where(low, up, r).astype(np.float32)


def _causal_mask(r0: int, r: int, c0: int, c: int) -> np.ndarray | None:
    """(r, c) bool, True where the key column is right of the query row (masked); None if nothing is masked."""
    if c0 + c - 1 <= r0:
        return None
    return (np.arange(c0, c0 + c)[None, :] > np.arange(r0, r0 + r)[:, None])


class _Stepper:
    """Runs one head through a Memory. Tile loops written as in the papers; arithmetic fp32 on (r, c) tiles.

    SRAM copies carry Memory's default names, "<tensor><tile>" (e.g. "K(2,)"), so a free event names the load it
    ends; on-chip intermediates are "S(i, j)", "dP(i, j)", "O_acc(i,)", "m_acc(i,)", "l_acc(i,)", "D_acc(i,)",
    "dK_acc(j,)", "dV_acc(j,)".
    """

    def __init__(self, mem: Memory, problem, br: int, bc: int, keep_o: bool):
        self.mem, self.p, self.br, self.bc = mem, problem, br, bc
        self.n, self.d = problem.n, problem.d
        self.tau = np.float32(softmax_scale(problem.d))
        self.causal = problem.causal
        self.sd = problem.stats_dtype
        self.keep_o = keep_o

    def rows(self, i):
        r0 = i * self.br
        return r0, min(r0 + self.br, self.n) - r0

    def cols(self, j):
        c0 = j * self.bc
        return c0, min(c0 + self.bc, self.n) - c0

    def scores(self, q_i, k_j, r0, r, c0, c):
        """S_ij = τ·Q_i K_jᵀ, masked to −inf right of the diagonal under causal. (r, c) fp32."""
        s = (q_i @ k_j.T) * self.tau  # (r, c)
        if self.causal:
            mask = _causal_mask(r0, r, c0, c)
            if mask is not None:
                s = np.where(mask, np.float32(-np.inf), s)
        return s

    def _stats(self, m, l, o):
        st = {"m": m.copy(), "l": l.copy()}
        if self.keep_o:
            st["O"] = o.copy()
        return st

    # --- forward, FA2 order -----------------------------------------------------------------------------------
    def flash2_forward(self):
        mem, n, d = self.mem, self.n, self.d
        mem.empty("O", (n, d))
        mem.empty("L", (n,), dtype=self.sd)
        for i in range(_n_blocks(n, self.br)):
            r0, r = self.rows(i)
            rs = slice(r0, r0 + r)
            q_i = mem.load("Q", rows=rs, tile=(i,), note=f"Q block {i}")  # (r, d)
            mem.scratch(f"m_acc{(i,)}", r * ACC_BYTES)
            mem.scratch(f"l_acc{(i,)}", r * ACC_BYTES)
            mem.scratch(f"O_acc{(i,)}", r * d * ACC_BYTES)
            m = np.full(r, -np.inf, np.float32)  # (r,) running max
            l = np.zeros(r, np.float32)  # (r,) running denominator, relative to m
            acc = np.zeros((r, d), np.float32)  # (r, d) unnormalised O
            for j in range(_visible_cols(n, self.br, self.bc, i, self.causal)):
                c0, c = self.cols(j)
                cs = slice(c0, c0 + c)
                k_j = mem.load("K", rows=cs, tile=(j,), note=f"K block {j}")  # (c, d)
                v_j = mem.load("V", rows=cs, tile=(j,), note=f"V block {j}")  # (c, d)
                mem.scratch(f"S{(i, j)}", r * c * ACC_BYTES)
                s = self.scores(q_i, k_j, r0, r, c0, c)  # (r, c)
                m_new = np.maximum(m, s.max(axis=1))  # (r,)
                p = np.exp(s - m_new[:, None])  # (r, c), masked entries → 0
                alpha = np.exp(m - m_new)  # (r,) rescale of the old l and O (0 on the first tile)
                l = alpha * l + p.sum(axis=1)
                acc = alpha[:, None] * acc + p @ v_j  # (r, d)
                m = m_new
                mem.compute(4 * r * c * d, tensor="S", tile=(i, j), note="S=τQKᵀ, online softmax, O+=PV",
                            stats=self._stats(m, l, acc / l[:, None]))
                mem.free(f"S{(i, j)}", f"K{(j,)}", f"V{(j,)}")
            mem.store("O", acc / l[:, None], rows=rs, tile=(i,), note="O_i = acc / l, written once")
            mem.store("L", m + np.log(l), rows=rs, tile=(i,), note="logsumexp L_i = m + log l")
            mem.free(f"Q{(i,)}", f"m_acc{(i,)}", f"l_acc{(i,)}", f"O_acc{(i,)}")

    # --- forward, FA1 order (Algorithm 1) ---------------------------------------------------------------------
    def flash1_forward(self):
        mem, n, d = self.mem, self.n, self.d
        # line 2: O = 0, l = 0, m = −inf in HBM; a memset outside the loop (init_write_bytes, not counted here)
        mem.empty("O", (n, d), fill=0.0)
        mem.empty("l", (n,), dtype=self.sd, fill=0.0)
        mem.empty("m", (n,), dtype=self.sd, fill=-np.inf)
        for j in range(_n_blocks(n, self.bc)):
            c0, c = self.cols(j)
            cs = slice(c0, c0 + c)
            k_j = mem.load("K", rows=cs, tile=(j,), note=f"K block {j}")  # (c, d)
            v_j = mem.load("V", rows=cs, tile=(j,), note=f"V block {j}")  # (c, d)
            for i in range(_first_visible_row_block(self.br, self.bc, j, self.causal), _n_blocks(n, self.br)):
                r0, r = self.rows(i)
                rs = slice(r0, r0 + r)
                q_i = mem.load("Q", rows=rs, tile=(i,))  # (r, d)
                o_i = mem.load("O", rows=rs, tile=(i,))  # (r, d) normalised so far
                l_i = mem.load("l", rows=rs, tile=(i,))  # (r,)
                m_i = mem.load("m", rows=rs, tile=(i,))  # (r,)
                mem.scratch(f"S{(i, j)}", r * c * ACC_BYTES)
                mem.scratch(f"O_acc{(i,)}", r * d * ACC_BYTES)
                s = self.scores(q_i, k_j, r0, r, c0, c)  # (r, c)
                m_t = s.max(axis=1)  # (r,) m̃_ij; −inf for a row the diagonal masks entirely
                m_t_safe = np.where(np.isneginf(m_t), np.float32(0), m_t)
                p_t = np.exp(s - m_t_safe[:, None])  # (r, c) P̃_ij
                l_t = p_t.sum(axis=1)  # (r,) l̃_ij
                # m_new rounded *up* to the stats dtype: what HBM will hold, used consistently from here on
                m_new = _round_up(np.maximum(m_i, m_t), self.sd)  # (r,)
                a = np.exp(m_i - m_new)  # (r,) e^(m_i − m_new), 0 on the first visit (m_i = −inf)
                bt = np.exp(m_t - m_new)  # (r,) e^(m̃ − m_new)
                l_new = a * l_i + bt * l_t
                o_new = ((l_i * a)[:, None] * o_i + bt[:, None] * (p_t @ v_j)) / l_new[:, None]  # (r, d)
                mem.compute(4 * r * c * d, tensor="S", tile=(i, j), note="S=τQKᵀ, P̃, rescale O_i",
                            stats=self._stats(m_new, l_new, o_new))
                mem.store("O", o_new, rows=rs, tile=(i,))
                mem.store("l", l_new, rows=rs, tile=(i,))
                mem.store("m", m_new, rows=rs, tile=(i,))
                mem.free(*(f"{t}{(i,)}" for t in ("Q", "O", "l", "m", "O_acc")), f"S{(i, j)}")
            mem.free(f"K{(j,)}", f"V{(j,)}")

    # --- backward (Algorithm 4 order: outer over K/V blocks) --------------------------------------------------
    def backward(self, algo):
        mem, n, d, tau = self.mem, self.n, self.d, self.tau
        mem.empty("dQ", (n, d), fill=0.0)  # zeroed before the loop: init_write_bytes
        mem.empty("dK", (n, d))
        mem.empty("dV", (n, d))
        if algo == "flash2":  # preprocess: D = rowsum(dO ∘ O), one pass, written once
            mem.empty("D", (n,), dtype=self.sd)
            for i in range(_n_blocks(n, self.br)):
                r0, r = self.rows(i)
                rs = slice(r0, r0 + r)
                o_i = mem.load("O", rows=rs, tile=(i,))  # (r, d)
                do_i = mem.load("dO", rows=rs, tile=(i,))  # (r, d)
                mem.scratch(f"D_acc{(i,)}", r * ACC_BYTES)
                mem.compute(0, tensor="D", tile=(i,), note="D_i = rowsum(dO_i ∘ O_i)")
                mem.store("D", (do_i * o_i).sum(axis=1), rows=rs, tile=(i,))
                mem.free(f"O{(i,)}", f"dO{(i,)}", f"D_acc{(i,)}")
        for j in range(_n_blocks(n, self.bc)):
            c0, c = self.cols(j)
            cs = slice(c0, c0 + c)
            k_j = mem.load("K", rows=cs, tile=(j,))  # (c, d)
            v_j = mem.load("V", rows=cs, tile=(j,))  # (c, d)
            mem.scratch(f"dK_acc{(j,)}", c * d * ACC_BYTES)
            mem.scratch(f"dV_acc{(j,)}", c * d * ACC_BYTES)
            dk = np.zeros((c, d), np.float32)
            dv = np.zeros((c, d), np.float32)
            for i in range(_first_visible_row_block(self.br, self.bc, j, self.causal), _n_blocks(n, self.br)):
                r0, r = self.rows(i)
                rs = slice(r0, r0 + r)
                q_i = mem.load("Q", rows=rs, tile=(i,))  # (r, d)
                if algo == "flash1":
                    o_i = mem.load("O", rows=rs, tile=(i,))  # (r, d)
                do_i = mem.load("dO", rows=rs, tile=(i,))  # (r, d)
                dq_i = mem.load("dQ", rows=rs, tile=(i,))  # (r, d)
                if algo == "flash1":
                    m_i = mem.load("m", rows=rs, tile=(i,))  # (r,)
                    l_i = mem.load("l", rows=rs, tile=(i,))  # (r,)
                    mem.scratch(f"D_acc{(i,)}", r * ACC_BYTES)
                    d_i = (do_i * o_i).sum(axis=1)  # (r,) recomputed on chip
                else:
                    lse_i = mem.load("L", rows=rs, tile=(i,))  # (r,)
                    d_i = mem.load("D", rows=rs, tile=(i,))  # (r,)
                mem.scratch(f"S{(i, j)}", r * c * ACC_BYTES)
                mem.scratch(f"dP{(i, j)}", r * c * ACC_BYTES)
                s = self.scores(q_i, k_j, r0, r, c0, c)  # (r, c) recomputed
                if algo == "flash1":
                    p = np.exp(s - m_i[:, None]) / l_i[:, None]  # (r, c) P_ij = diag(l)⁻¹ e^(S − m)
                else:
                    p = np.exp(s - lse_i[:, None])  # (r, c) P_ij = e^(S − L)
                dv += p.T @ do_i  # (c, d)
                dp = do_i @ v_j.T  # (r, c)
                ds = p * (dp - d_i[:, None])  # (r, c) dS = P ∘ (dP − D)
                dq_i = dq_i + tau * (ds @ k_j)  # (r, d)
                dk += tau * (ds.T @ q_i)  # (c, d)
                mem.compute(10 * r * c * d, tensor="dS", tile=(i, j), note="S, P recomputed; dV, dP, dS, dQ, dK")
                mem.store("dQ", dq_i, rows=rs, tile=(i,), note="dQ_i += τ dS K_j")
                mem.free(*(f"{t}{(i,)}" for t in ("Q", "O", "dO", "dQ", "m", "l", "L", "D", "D_acc")), f"S{(i, j)}",
                         f"dP{(i, j)}")
            mem.store("dK", dk, rows=cs, tile=(j,))
            mem.store("dV", dv, rows=cs, tile=(j,))
            mem.free(f"K{(j,)}", f"V{(j,)}", f"dK_acc{(j,)}", f"dV_acc{(j,)}")


def _as_heads(name: str, x, heads: int, n: int, d: int) -> np.ndarray:
    if x is None:
        raise FlashsimError(f"{name} is required (an array of shape (heads, N, d) = ({heads}, {n}, {d}))")
    a = np.asarray(x, dtype=np.float32)
    if a.ndim == 2 and heads == 1:
        a = a[None]
    if a.shape != (heads, n, d):
        raise FlashsimError(f"{name} has shape {np.shape(x)}: expected (heads, N, d) = ({heads}, {n}, {d})")
    return a


def step_host_bytes(problem, br: int, bc: int, record_events: bool = True) -> int:
    """Host memory step mode needs (an estimate, for the budget check): one head's HBM tensors (fp32), the outputs
    of all heads, and head 0's event log: about 16 events of ~500 bytes per tile per phase, plus the m, l rows."""
    n, d, h = problem.n, problem.d, problem.heads
    tensors = (12 if problem.backward else 6) * n * d * 4 + 4 * n * 4
    outputs = h * (4 if problem.backward else 1) * n * d * 4 + h * n * 4
    tiles = _n_blocks(n, br) * _n_blocks(n, bc) * (2 if problem.backward else 1)
    events = tiles * (16 * 500 + 2 * min(br, n) * 4) if record_events else 0
    return tensors + outputs + events


def run_flash(problem, q, k, v, do=None, memory: Memory | None = None, record_events: bool = True) -> FlashRun:
    """Step mode: run flash1/flash2 (forward, + backward when problem.backward) on real numbers.

    q, k, v (and do for the backward): float arrays (heads, N, d) ((N, d) accepted when heads == 1). Every head
    runs through a Memory; head 0's keeps its Event log (record_events) and is returned as ``.memory``. Pass
    `memory` to supply head 0's Memory yourself (e.g. with an on_event callback); its capacity should be the
    problem's SRAM.
    """
    br, bc = resolve_blocks(problem)
    n, d, h = problem.n, problem.d, problem.heads
    check_host_budget(step_host_bytes(problem, br, bc, record_events),
                      fix="use record_events=False (no event log), larger blocks, a smaller N, or count mode "
                          "(count_flash / flashsim.traffic), which needs no numbers")
    q, k, v = (_as_heads(nm, x, h, n, d) for nm, x in (("q", q), ("k", k), ("v", v)))
    if problem.backward:
        do = _as_heads("do", do, h, n, d)
    tiles = _n_blocks(n, br) * _n_blocks(n, bc)
    keep_o = record_events and tiles * min(br, n) * d * 4 <= EVENT_O_BUDGET_BYTES
    out = np.empty((h, n, d), np.float32)
    lse = np.empty((h, n), np.float32)
    grads = tuple(np.empty((h, n, d), np.float32) for _ in range(3)) if problem.backward else None
    with single_blas_thread():
        fwd_total, bwd_total, mem0 = _run_heads(problem, br, bc, q, k, v, do, memory, record_events, keep_o,
                                                out, lse, grads)
    total = fwd_total + bwd_total if bwd_total is not None else fwd_total * 1
    init = n * d * problem.elem_bytes + 2 * n * problem.stats_bytes if problem.algo == "flash1" else 0
    if problem.backward:
        init += n * d * problem.elem_bytes
    _, tiles_set = _effective_peak(problem, br, bc)
    return FlashRun(problem, br, bc, total, fwd_total, bwd_total, init * h, tiles_set,
                    out=out, lse=lse, grads=grads, memory=mem0)


def _run_heads(problem, br, bc, q, k, v, do, memory, record_events, keep_o, out, lse, grads):
    """Every head through its own Memory (head 0's keeps the event log); returns summed counters and Memory 0."""
    fwd_total = bwd_total = mem0 = None
    for head in range(problem.heads):
        if head == 0 and memory is not None:
            mem = memory
        else:
            mem = Memory(problem.sram_bytes, problem.dtype, record_events=record_events and head == 0)
        for name, x in (("Q", q[head]), ("K", k[head]), ("V", v[head])):
            mem.put(name, x)
        st = _Stepper(mem, problem, br, bc, keep_o and head == 0)
        mem.counters = Counters()
        if problem.algo == "flash1":
            st.flash1_forward()
            m, l = mem.hbm("m"), mem.hbm("l")
            with np.errstate(divide="ignore"):
                lse[head] = m + np.log(l)
        else:
            st.flash2_forward()
            lse[head] = mem.hbm("L")
        out[head] = mem.hbm("O")
        fwd = mem.counters
        bwd = None
        if problem.backward:
            mem.put("dO", do[head])
            mem.counters = Counters()
            st.backward(problem.algo)
            bwd = mem.counters
            for g, name in zip(grads, ("dQ", "dK", "dV")):
                g[head] = mem.hbm(name)
            mem.counters = fwd + bwd
        fwd_total = fwd if fwd_total is None else fwd_total + fwd
        if bwd is not None:
            bwd_total = bwd if bwd_total is None else bwd_total + bwd
        if head == 0:
            mem0 = mem
    return fwd_total, bwd_total, mem0


# ---------------------------------------------------------------------------------------------------------------
# References (tests, simulate's error, chapter 05's comparison). These build the N×N matrix: small N only.
# ---------------------------------------------------------------------------------------------------------------
def reference_attention(q, k, v, causal: bool = False, dtype=None, scale: float | None = None) -> np.ndarray:
    """Plain attention softmax(τQKᵀ)V over (..., N, d) arrays, materializing S and P (Algorithm 0's formula).

    dtype None: float64 throughout, the exact reference. dtype "fp32"/"fp16"/"bf16": a plain implementation in that
    storage dtype: inputs, S, P and O each rounded to it, every matmul and the softmax computed in fp32 on the
    rounded values (what a framework's fp16 attention does). Returns float64 (dtype None) or float32.
    """
    if dtype is None:
        q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
        d = q.shape[-1]
        s = (q @ np.swapaxes(k, -1, -2)) * (softmax_scale(d) if scale is None else scale)
        if causal:
            n_q, n_k = s.shape[-2:]
            s = np.where(np.arange(n_k)[None, :] > np.arange(n_q)[:, None], -np.inf, s)
        s = s - s.max(axis=-1, keepdims=True)
        p = np.exp(s)
        p /= p.sum(axis=-1, keepdims=True)
        return p @ v
    dt = canonical_dtype(dtype)
    q, k, v = (round_to(np.asarray(x, np.float32), dt) for x in (q, k, v))
    d = q.shape[-1]
    with np.errstate(over="ignore", invalid="ignore"):
        s = round_to((q @ np.swapaxes(k, -1, -2)) * np.float32(softmax_scale(d) if scale is None else scale), dt)
        if causal:
            n_q, n_k = s.shape[-2:]
            s = np.where(np.arange(n_k)[None, :] > np.arange(n_q)[:, None], np.float32(-np.inf), s)
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        p = round_to(e / e.sum(axis=-1, keepdims=True), dt)
        return round_to(p @ v, dt)


def reference_attention_grads(q, k, v, do, causal: bool = False, scale: float | None = None):
    """Float64 gradients (dq, dk, dv) of sum(O ∘ dO) for O = softmax(τQKᵀ)V over (..., N, d) arrays."""
    q, k, v, do = (np.asarray(x, np.float64) for x in (q, k, v, do))
    tau = softmax_scale(q.shape[-1]) if scale is None else scale
    s = (q @ np.swapaxes(k, -1, -2)) * tau
    if causal:
        n_q, n_k = s.shape[-2:]
        s = np.where(np.arange(n_k)[None, :] > np.arange(n_q)[:, None], -np.inf, s)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    dv = np.swapaxes(p, -1, -2) @ do
    dp = do @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    return tau * (ds @ k), tau * (np.swapaxes(ds, -1, -2) @ q), dv
