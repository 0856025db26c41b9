"""Standard attention on the simulated hierarchy: Algorithm 0 and the eager-framework op model (chapter 02).

Chapter 02 asks one question: *where do the bytes of standard attention go?* The answer is "to the N×N
matrices". Algorithm 0 of the FlashAttention paper writes the scores S = QKᵀ to HBM, reads them back to compute
P = softmax(S), writes P, and reads it again for O = PV::

    S = scale · Q Kᵀ        # (N, N) written to HBM        read Q, K: 2Nd    write S: N²
    P = softmax(S)          # (N, N) read and written      read S:    N²     write P: N²
    O = P V                 # (N, d)                       read P, V: N²+Nd  write O: Nd

so a head reads (3Nd + 2N²)·b bytes and writes (2N² + Nd)·b, b the bytes of the storage dtype.

A framework running attention *op by op* (PyTorch eager) does more round trips: each op is its own kernel that
reads its inputs from HBM and writes its output back. :class:`EagerOps` says which ops are separate kernels:

    matmul → scale → mask → float cast → softmax → cast back → dropout → matmul

and autograd's backward runs the reverse sequence, every op again a round trip. Algorithm 0 is the special case
where scale and mask are fused into the kernels around them (``NAIVE_OPS``); the Megatron-LM preset adds a
dropout kernel to that (see :mod:`flashsim.model.paper` for why that is the model of FA1's Fig. 2).

Both algorithms are built from one *program*: a list of :class:`Op` (GEMMs, element-wise ops, row softmax and its
backward) over named tensors. The program runs in two modes with identical :class:`~flashsim.model.memory.Counters`:

- **step mode** (:func:`run_standard`) moves real numbers through :class:`~flashsim.model.memory.Memory` tile by tile
  (Br × Bc tiles of the N×N matrices, emitting one Event per load/store/compute), rounding every stored tensor to
  its dtype and computing in fp32;
- **count mode** (:func:`count_standard`) walks the same ops over the same tile grid with numpy arrays of tile
  sizes instead of numbers: microseconds at any N.

Conventions (docs/design.md): each GEMM is an ideal library call that reads each operand tile from HBM once
(``Memory.load(..., count_once=True)``; re-reads are ``reuse_bytes``); the row softmax is ideal too (its second
pass over a row block is a reuse, as if the row stayed on chip); only matmul FLOPs are counted. The tiles change
``sram_peak_bytes`` and ``reuse_bytes``, never the HBM bytes, which are whole-tensor sizes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from flashsim.errors import FlashsimError
from flashsim.model.attention.online_softmax import online_softmax_update
from flashsim.model.attention.visibility import block_sizes, causal_mask
from flashsim.model.blas import single_blas_thread
from flashsim.model.memory import (MASK_DTYPE, Counters, Memory, check_host_budget, check_tile_set_fits,
                      largest_fitting_block, storage_bytes)
from flashsim.model.problem import Problem


__all__ = ["EagerOps", "EAGER_PRESETS", "NAIVE_OPS", "Op", "Program", "StandardCount", "StandardRun",
           "build_program", "resolve_eager_ops", "resolve_standard_blocks", "count_standard", "run_standard",
           "standard_host_bytes"]

#: GEMM and element-wise tiles are at most this big by default (a typical library tile)
DEFAULT_MAX_BLOCK = 128


@dataclass(frozen=True)
class EagerOps:
    """Which steps of standard attention run as their own kernel (one HBM round trip each) (chapter 02).

    fuse_scale: the 1/√d scale is applied inside the QKᵀ matmul (``torch.baddbmm(..., alpha=scale)``) instead of
        a separate ``S * scale`` kernel.
    fuse_mask_softmax: causal mask and softmax are one kernel computing in fp32 registers (Megatron's
        ``FusedScaleMaskSoftmax``, or Algorithm 0): no separate mask kernel and no float cast round trip.
    upcast: when not fused, softmax runs in fp32 behind explicit casts (``S.float()`` ... ``P.half()``), as
        ``torch.autocast`` does; ignored for fp32 storage, where the cast is a no-op.
    """

    fuse_scale: bool = False
    fuse_mask_softmax: bool = False
    upcast: bool = True
    name: str = "pytorch"


#: named eager configurations. "pytorch": every op of the list its own kernel. "megatron2020": Megatron-LM's GPT-2
#: self-attention (baddbmm with the scale, fused scale-mask-softmax, dropout, bmm), the FA1 Fig. 2 baseline.
EAGER_PRESETS = {
    "pytorch": EagerOps(),
    "megatron2020": EagerOps(fuse_scale=True, fuse_mask_softmax=True, upcast=False, name="megatron2020"),
}

#: Algorithm 0: three kernels (S = scale·QKᵀ, P = softmax(mask(S)), O = PV), no dropout
NAIVE_OPS = EagerOps(fuse_scale=True, fuse_mask_softmax=True, upcast=False, name="algorithm0")


def resolve_eager_ops(eager_ops=None) -> EagerOps:
    """None → the "pytorch" preset; a preset name; or an EagerOps."""
    if eager_ops is None:
        return EAGER_PRESETS["pytorch"]
    if isinstance(eager_ops, EagerOps):
        return eager_ops
    if isinstance(eager_ops, str) and eager_ops.lower() in EAGER_PRESETS:
        return EAGER_PRESETS[eager_ops.lower()]
    raise FlashsimError(f"unknown eager_ops {eager_ops!r}: use one of {sorted(EAGER_PRESETS)} or an EagerOps(...)")


# --- the program: ops over named tensors ---------------------------------------------------------------------

@dataclass(frozen=True)
class Op:
    """One kernel of standard attention.

    kind: "gemm_nn"  out[i, j] = s · A_i B_jᵀ     (N, N) from two (N, d) operands
          "gemm_nd"  out_i = s · Σ_j X_ij Y_j     (N, d); transpose=True: out_j = s · Σ_i X_ijᵀ Y_i
          "eltwise"  out = fn(ins) tile by tile   (N, N); fn in scale, mask, mask_bwd, cast, dropout, dropout_bwd
          "softmax"  out = softmax(X) per row     (mask=True: causal mask fused in)
          "softmax_bwd"  out = P ∘ (dP − rowsum(P ∘ dP))
    """

    kind: str
    out: str
    ins: tuple
    fn: str = ""
    scale: bool = False  # multiply by 1/√d (fused scale)
    transpose: bool = False
    mask: bool = False  # causal mask fused into the softmax
    extra_out: str = ""  # dropout's 1-byte keep mask


@dataclass(frozen=True)
class Program:
    forward: tuple
    backward: tuple
    dtypes: dict  # tensor name -> storage dtype ("fp16", ..., or "bool")
    shapes: dict  # tensor name -> "nn" (N, N) or "nd" (N, d)


def build_program(ops: EagerOps, dtype: str, causal: bool, dropout: bool, backward: bool) -> Program:
    """The op list of one head: forward, then autograd's reverse (each grad is named "d" + tensor)."""
    dt = dtype
    dtypes = {"Q": dt, "K": dt, "V": dt, "O": dt, "dO": dt, "dQ": dt, "dK": dt, "dV": dt}
    fwd = [Op("gemm_nn", "S", ("Q", "K"), scale=ops.fuse_scale)]
    dtypes["S"] = dt
    x = "S"

    def add(op: Op, out_dtype: str) -> None:
        fwd.append(op)
        dtypes[op.out] = out_dtype

    if not ops.fuse_scale:
        add(Op("eltwise", "S_scaled", (x,), fn="scale"), dt)
        x = "S_scaled"
    if ops.fuse_mask_softmax:
        add(Op("softmax", "P", (x,), mask=causal), dt)
    else:
        if causal:
            dtypes["causal_mask"] = MASK_DTYPE
            add(Op("eltwise", "S_masked", (x, "causal_mask"), fn="mask"), dt)
            x = "S_masked"
        if ops.upcast and dt != "fp32":
            add(Op("eltwise", "S_fp32", (x,), fn="cast"), "fp32")
            add(Op("softmax", "P_fp32", ("S_fp32",)), "fp32")
            add(Op("eltwise", "P", ("P_fp32",), fn="cast"), dt)
        else:
            add(Op("softmax", "P", (x,)), dt)
    x = "P"
    if dropout:
        dtypes["drop_mask"] = MASK_DTYPE
        add(Op("eltwise", "P_drop", ("P",), fn="dropout", extra_out="drop_mask"), dt)
        x = "P_drop"
    add(Op("gemm_nd", "O", (x, "V")), dt)

    bwd = []
    if backward:
        for op in reversed(fwd):
            bwd.extend(_backward_of(op, dtypes))
    shapes = {name: ("nd" if name in ("Q", "K", "V", "O", "dO", "dQ", "dK", "dV") else "nn") for name in dtypes}
    return Program(tuple(fwd), tuple(bwd), dtypes, shapes)


def _backward_of(op: Op, dtypes: dict) -> list:
    """Autograd's kernels for one forward op; grads take their tensor's dtype."""
    ops = _backward_ops(op)
    for b in ops:
        dtypes.setdefault(b.out, dtypes[b.out[1:]])
    return ops


def _backward_ops(op: Op) -> list:
    d = "d" + op.out
    if op.kind == "gemm_nd":  # O = X V  ->  dX = dO Vᵀ, dV = Xᵀ dO
        x, v = op.ins
        return [Op("gemm_nn", "d" + x, (d, v)), Op("gemm_nd", "d" + v, (x, d), transpose=True)]
    if op.kind == "gemm_nn":  # S = s·Q Kᵀ  ->  dQ = s·dS K, dK = s·dSᵀ Q
        q, k = op.ins
        return [Op("gemm_nd", "d" + q, (d, k), scale=op.scale),
                Op("gemm_nd", "d" + k, (d, q), scale=op.scale, transpose=True)]
    if op.kind == "softmax":  # dX = P ∘ (dP − rowsum(P ∘ dP)); masked entries have P = 0, so dX = 0 there
        return [Op("softmax_bwd", "d" + op.ins[0], (op.out, d))]
    x = op.ins[0]
    if op.fn == "scale":
        return [Op("eltwise", "d" + x, (d,), fn="scale")]
    if op.fn == "mask":
        return [Op("eltwise", "d" + x, (d, op.ins[1]), fn="mask_bwd")]
    if op.fn == "cast":
        return [Op("eltwise", "d" + x, (d,), fn="cast")]
    if op.fn == "dropout":
        return [Op("eltwise", "d" + x, (d, op.extra_out), fn="dropout_bwd")]
    raise AssertionError(op)  # pragma: no cover


def _program_for(problem: Problem, eager_ops=None) -> tuple[Program, EagerOps]:
    if problem.algo == "naive":
        if problem.dropout_p:
            raise FlashsimError("algo='naive' is Algorithm 0, which has no dropout: use algo='eager' "
                                "(eager_ops='megatron2020' is Algorithm 0 plus a dropout kernel) or dropout_p=0")
        ops = NAIVE_OPS
    elif problem.algo == "eager":
        ops = resolve_eager_ops(eager_ops)
    else:
        raise FlashsimError(f"standard attention runs algo 'naive' or 'eager', not {problem.algo!r}")
    return build_program(ops, problem.dtype, problem.causal, problem.dropout_p > 0, problem.backward), ops


# --- tiles and SRAM ------------------------------------------------------------------------------------------

def _tile_set(op: Op, prog: Program, r: int, c: int, d: int) -> dict:
    """SRAM an op holds for one r×c tile (r rows of the row block, c columns of the column block), in bytes."""
    b = {name: storage_bytes(dt) for name, dt in prog.dtypes.items()}
    if op.kind == "gemm_nn":
        a, bb = op.ins
        return {a: r * d * b[a], bb: c * d * b[bb], "acc (fp32)": r * c * 4}
    if op.kind == "gemm_nd":
        x, y = op.ins
        rows_out, rows_y = (c, r) if op.transpose else (r, c)
        return {x: r * c * b[x], y: rows_y * d * b[y], "acc (fp32)": rows_out * d * 4}
    if op.kind == "eltwise":
        tiles = {name: r * c * b[name] for name in op.ins}
        tiles[op.out + " (out)"] = r * c * b[op.out]
        if op.extra_out:
            tiles[op.extra_out + " (out)"] = r * c * b[op.extra_out]
        return tiles
    if op.kind == "softmax":
        return {"m, l (fp32)": 2 * r * 4, op.ins[0]: r * c * b[op.ins[0]], op.out + " (out)": r * c * b[op.out]}
    if op.kind == "softmax_bwd":
        p, dp = op.ins
        return {"D (fp32)": r * 4, p: r * c * b[p], dp: r * c * b[dp], op.out + " (out)": r * c * b[op.out]}
    raise AssertionError(op)  # pragma: no cover


def _sram_peak(prog: Program, n: int, d: int, block_r: int, block_c: int) -> tuple[int, Op, dict]:
    """Largest tile set of the program: (bytes, op, tile set). Tile sets grow with r and c: the first tile."""
    r, c = min(block_r, n), min(block_c, n)
    best = (0, None, {})
    for op in prog.forward + prog.backward:
        tiles = _tile_set(op, prog, r, c, d)
        total = sum(tiles.values())
        if total > best[0]:
            best = (total, op, tiles)
    return best


def resolve_standard_blocks(problem: Problem, eager_ops=None) -> tuple[int, int]:
    """GEMM / element-wise tile sizes (Br, Bc) for naive and eager (chapter 02).

    Given blocks are checked against SRAM; missing ones default to the largest power of two ≤ 128 that fits.
    They only change ``sram_peak_bytes`` and ``reuse_bytes``: the HBM bytes of standard attention do not depend
    on tiles.
    """
    prog, _ = _program_for(problem, eager_ops)
    n, d, cap = problem.n, problem.d, problem.sram_bytes
    br, bc = problem.block_r, problem.block_c
    if br is None or bc is None:
        def need(block: int) -> int:
            return _sram_peak(prog, n, d, br or block, bc or block)[0]
        block = largest_fitting_block(need, cap, start=DEFAULT_MAX_BLOCK)
        if block == 0:
            raise FlashsimError(f"no tile of {problem.algo} fits in {cap} bytes of SRAM at d={d}, "
                                f"dtype={problem.dtype}: use a larger sram_bytes or smaller d")
        br, bc = br or block, bc or block
    peak, op, tiles = _sram_peak(prog, n, d, br, bc)
    if peak > cap:
        fit = largest_fitting_block(lambda blk: _sram_peak(prog, n, d, blk, blk)[0], cap, start=max(br, bc))
        fix = (f"use block_r = block_c ≤ {fit} (or leave them unset)" if fit
               else f"no tile fits at d={d}: use a larger sram_bytes")
        check_tile_set_fits(tiles, cap, device_name=f"{problem.hardware.name} (op {op.out})",
                            fix=f"{problem.algo} tiles block_r={br}, block_c={bc} are too big: {fix}")
    return br, bc


# --- count mode ----------------------------------------------------------------------------------------------

@dataclass
class StandardCount:
    """Count-mode result: counters of all heads, and forward/backward parts (backward None without it)."""

    counters: Counters
    forward: Counters
    backward: Counters | None
    block_r: int
    block_c: int
    eager_ops: EagerOps
    program: Program
    init_write_bytes: int = 0  # standard attention writes every output in full: nothing to pre-initialise


def _count_op(op: Op, prog: Program, r: np.ndarray, c: np.ndarray, d: int, cnt: Counters) -> None:
    """Add one op's bytes, reuse and FLOPs over the tile grid (rows r, columns c) to `cnt`, without numbers."""
    b = {name: storage_bytes(dt) for name, dt in prog.dtypes.items()}
    tr, tc = len(r), len(c)
    area = int(r.sum()) * int(c.sum())  # Σ_i Σ_j r_i·c_j over the (Tr, Tc) tile grid: every tile's elements
    if op.kind == "gemm_nn":
        a, bb = op.ins
        cnt.add_read(a, int(r.sum()) * d * b[a])  # A_i first read at j = 0, then on chip
        cnt.add_read(bb, int(c.sum()) * d * b[bb])  # B_j first read at i = 0
        cnt.reuse_bytes += (tc - 1) * int(r.sum()) * d * b[a] + (tr - 1) * int(c.sum()) * d * b[bb]
        cnt.add_write(op.out, area * b[op.out])
        cnt.flops += 2 * area * d
    elif op.kind == "gemm_nd":
        x, y = op.ins
        cnt.add_read(x, area * b[x])
        if op.transpose:  # out_j = Σ_i X_ijᵀ Y_i: Y_i read at j = 0, reused for the other Tc − 1 blocks
            cnt.add_read(y, int(r.sum()) * d * b[y])
            cnt.reuse_bytes += (tc - 1) * int(r.sum()) * d * b[y]
            cnt.add_write(op.out, int(c.sum()) * d * b[op.out])
        else:
            cnt.add_read(y, int(c.sum()) * d * b[y])
            cnt.reuse_bytes += (tr - 1) * int(c.sum()) * d * b[y]
            cnt.add_write(op.out, int(r.sum()) * d * b[op.out])
        cnt.flops += 2 * area * d
    elif op.kind == "eltwise":
        for name in op.ins:
            cnt.add_read(name, area * b[name])
        cnt.add_write(op.out, area * b[op.out])
        if op.extra_out:
            cnt.add_write(op.extra_out, area * b[op.extra_out])
    else:  # softmax / softmax_bwd: pass 1 reads, pass 2 re-reads on chip (reuse) and writes
        for name in op.ins:
            cnt.add_read(name, area * b[name])
            cnt.reuse_bytes += area * b[name]
        cnt.add_write(op.out, area * b[op.out])
    peak = sum(_tile_set(op, prog, int(r.max()), int(c.max()), d).values())
    cnt.sram_peak_bytes = max(cnt.sram_peak_bytes, peak)


def count_standard(problem: Problem, eager_ops=None) -> StandardCount:
    """Count mode: the counters of naive or eager attention over all heads, no numbers (chapter 02)."""
    prog, ops = _program_for(problem, eager_ops)
    br, bc = resolve_standard_blocks(problem, ops)
    r, c = block_sizes(problem.n, br), block_sizes(problem.n, bc)
    fwd = Counters()
    for op in prog.forward:
        _count_op(op, prog, r, c, problem.d, fwd)
    bwd = None
    if problem.backward:
        bwd = Counters()
        for op in prog.backward:
            _count_op(op, prog, r, c, problem.d, bwd)
    fwd, bwd = fwd * problem.heads, (bwd * problem.heads if bwd is not None else None)
    total = fwd + bwd if bwd is not None else fwd + Counters()
    return StandardCount(total, fwd, bwd, br, bc, ops, prog)


# --- step mode -----------------------------------------------------------------------------------------------

@dataclass
class StandardRun:
    """Step-mode result. Arrays are (heads, N, d) float32 as HBM holds them (rounded to the storage dtype)."""

    out: np.ndarray
    grads: tuple | None  # (dq, dk, dv) when backward
    counters: Counters  # all heads
    forward: Counters
    backward: Counters | None
    memory: Memory  # head 0, with its Event log
    block_r: int
    block_c: int
    eager_ops: EagerOps
    program: Program
    init_write_bytes: int = 0
    lse: np.ndarray | None = None  # standard attention saves P, not a logsumexp
    extra: dict = field(default_factory=dict)


def standard_host_bytes(problem: Problem, eager_ops=None, record_events: bool = True) -> int:
    """Host memory step mode needs for one head (float32 holders of every tensor) plus all heads' in/outputs."""
    prog, _ = _program_for(problem, eager_ops)
    n, d = problem.n, problem.d
    per_head = sum(4 * (n * n if prog.shapes[t] == "nn" else n * d) for t in prog.dtypes)
    per_head += n * n  # the dropout keep mask (RNG stream) when present, bool
    br, bc = resolve_standard_blocks(problem, eager_ops)
    tiles = (-(-n // br)) * (-(-n // bc)) * (len(prog.forward) + len(prog.backward))
    events = tiles * 6 * 200 if record_events else 0  # ~6 events of ~200 bytes per tile
    return per_head + events + problem.heads * n * d * 4 * 8


def run_standard(problem: Problem, q, k, v, do=None, *, eager_ops=None, keep=None, memory: Memory | None = None,
                 record_events: bool = True, host_budget_bytes: int | None = None) -> StandardRun:
    """Step mode: run naive or eager attention on numbers through the simulated Memory (chapter 02).

    q, k, v, do: float arrays (heads, N, d) (or (N, d) for one head); stored in HBM rounded to ``problem.dtype``.
    keep: dropout keep masks (heads, N, N) bool, the random stream the dropout kernel draws from (generated from
    seed 0 when None and dropout_p > 0). memory: a Memory for head 0 (e.g. with an on_event callback); other
    heads run in fresh ones without events. Returns outputs, (dq, dk, dv) when backward, and the counters.
    """
    prog, ops = _program_for(problem, eager_ops)
    br, bc = resolve_standard_blocks(problem, ops)
    budget = {} if host_budget_bytes is None else {"budget_bytes": host_budget_bytes}
    check_host_budget(standard_host_bytes(problem, ops, record_events), **budget)
    arrays = [_as_heads(name, a, problem) for name, a in (("q", q), ("k", k), ("v", v))]
    if problem.backward:
        if do is None:
            raise FlashsimError("backward=True needs do (the gradient of the output), shape (heads, N, d)")
        arrays.append(_as_heads("do", do, problem))
    if problem.dropout_p and keep is None:
        keep = np.random.default_rng(0).random((problem.heads, problem.n, problem.n)) >= problem.dropout_p
    heads, n, d = problem.heads, problem.n, problem.d
    out = np.empty((heads, n, d), np.float32)
    grads = tuple(np.empty((heads, n, d), np.float32) for _ in range(3)) if problem.backward else None
    fwd_total, bwd_total, first = Counters(), Counters(), None
    for h in range(heads):
        if h == 0 and memory is not None:
            mem = memory
        else:
            mem = Memory(problem.sram_bytes, problem.dtype, record_events=record_events and h == 0)
        for name, a in zip(("Q", "K", "V", "dO"), arrays):
            mem.put(name, a[h], prog.dtypes[name])
        if "causal_mask" in prog.dtypes:
            mem.put("causal_mask", np.triu(np.ones((n, n), bool), 1), MASK_DTYPE)
        for name, dt in prog.dtypes.items():
            if name not in ("Q", "K", "V", "dO", "causal_mask"):
                mem.empty(name, (n, n) if prog.shapes[name] == "nn" else (n, d), dt)
        ctx = _StepContext(mem, n, d, br, bc, 1.0 / math.sqrt(d), problem.dropout_p,
                           keep[h] if keep is not None else None)
        with np.errstate(all="ignore"), single_blas_thread():  # fp16 overflow to ±inf is part of the lesson
            for op in prog.forward:
                ctx.run(op)
            fwd_c = mem.counters
            if problem.backward:
                mem.counters = Counters()
                for op in prog.backward:
                    ctx.run(op)
                bwd_c = mem.counters
                mem.counters = fwd_c + bwd_c
                bwd_total = bwd_total + bwd_c
                for g, name in zip(grads, ("dQ", "dK", "dV")):
                    g[h] = mem.hbm(name)
        fwd_total = fwd_total + fwd_c
        out[h] = mem.hbm("O")
        first = first or mem
    bwd = bwd_total if problem.backward else None
    total = fwd_total + bwd if bwd is not None else fwd_total + Counters()
    return StandardRun(out, grads, total, fwd_total, bwd, first, br, bc, ops, prog)


def _as_heads(name: str, a, problem: Problem) -> np.ndarray:
    a = np.asarray(a, dtype=np.float32)
    if a.ndim == 2:
        a = a[None]
    want = (problem.heads, problem.n, problem.d)
    if a.shape != want:
        raise FlashsimError(f"{name} has shape {a.shape}, expected (heads, N, d) = {want}")
    return a


class _StepContext:
    """Runs ops tile by tile on one head's Memory. Loop order = the count-mode grid."""

    def __init__(self, mem: Memory, n: int, d: int, br: int, bc: int, scale: float, dropout_p: float, keep):
        self.mem, self.n, self.d, self.scale, self.p, self.keep = mem, n, d, scale, dropout_p, keep
        self.rows = [(i, slice(i * br, min((i + 1) * br, n))) for i in range(-(-n // br))]
        self.cols = [(j, slice(j * bc, min((j + 1) * bc, n))) for j in range(-(-n // bc))]

    def run(self, op: Op) -> None:
        getattr(self, "_" + op.kind)(op)
        self.mem.forget_reuse()

    def _gemm_nn(self, op: Op) -> None:  # out[i, j] = s · A_i B_jᵀ
        mem, (a_name, b_name) = self.mem, op.ins
        s = self.scale if op.scale else 1.0
        for i, ri in self.rows:
            for j, cj in self.cols:
                a = mem.load(a_name, rows=ri, tile=(i,), as_name="A", count_once=True)  # (r, d)
                b = mem.load(b_name, rows=cj, tile=(j,), as_name="B", count_once=True)  # (c, d)
                mem.scratch("acc", a.shape[0] * b.shape[0] * 4)
                tile = (a @ b.T) * np.float32(s)  # (r, c), fp32 accumulate
                mem.compute(2 * tile.size * self.d, tensor=op.out, tile=(i, j),
                            note=f"{op.out} = {a_name}·{b_name}ᵀ")
                mem.store(op.out, tile, rows=ri, cols=cj, tile=(i, j))
                mem.free("A", "B", "acc")

    def _gemm_nd(self, op: Op) -> None:  # out_i = s · Σ_j X_ij Y_j  (transpose: out_j = s · Σ_i X_ijᵀ Y_i)
        mem, (x_name, y_name) = self.mem, op.ins
        s = np.float32(self.scale if op.scale else 1.0)
        outer, inner = (self.cols, self.rows) if op.transpose else (self.rows, self.cols)
        for o, ro in outer:
            acc = np.zeros((ro.stop - ro.start, self.d), np.float32)  # (rows of the out block, d)
            mem.scratch("acc", acc.size * 4)
            for t, rt in inner:
                ij, (ri, cj) = ((t, o), (rt, ro)) if op.transpose else ((o, t), (ro, rt))
                x = mem.load(x_name, rows=ri, cols=cj, tile=ij, as_name="X", count_once=True)  # (r, c)
                y = mem.load(y_name, rows=rt, tile=(t,), as_name="Y", count_once=True)  # (rows of t, d)
                acc += (x.T if op.transpose else x) @ y
                mem.compute(2 * x.size * self.d, tensor=op.out, tile=ij, note=f"{op.out} += {x_name}·{y_name}")
                mem.free("X", "Y")
            mem.store(op.out, acc * s, rows=ro, tile=(o,))
            mem.free("acc")

    def _eltwise(self, op: Op) -> None:
        mem = self.mem
        for i, ri in self.rows:
            for j, cj in self.cols:
                ins = [mem.load(name, rows=ri, cols=cj, tile=(i, j), as_name=f"in{k}")
                       for k, name in enumerate(op.ins)]  # each (r, c)
                r, c = ins[0].shape
                mem.scratch("out", r * c * storage_bytes(mem.dtype_of(op.out)))
                if op.extra_out:
                    mem.scratch("out2", r * c * storage_bytes(mem.dtype_of(op.extra_out)))
                y = self._elementwise_value(op, ins, ri, cj)
                mem.compute(0, tensor=op.out, tile=(i, j), note=f"{op.out} = {op.fn}({', '.join(op.ins)})")
                mem.store(op.out, y, rows=ri, cols=cj, tile=(i, j))
                if op.extra_out:
                    mem.store(op.extra_out, self.keep[ri, cj], rows=ri, cols=cj, tile=(i, j))
                mem.free(*[f"in{k}" for k in range(len(ins))], "out", "out2")

    def _elementwise_value(self, op: Op, ins: list, ri: slice, cj: slice) -> np.ndarray:
        x = ins[0]
        if op.fn == "scale":
            return x * np.float32(self.scale)
        if op.fn == "cast":
            return x  # the store rounds to the output's dtype
        if op.fn == "mask":  # masked_fill(mask, -inf): the mask tile says which entries are in the future
            return np.where(ins[1] != 0, np.float32(-np.inf), x)
        if op.fn == "mask_bwd":
            return np.where(ins[1] != 0, np.float32(0), x)
        if op.fn == "dropout":  # the keep bits come from the on-chip RNG stream (not HBM)
            return x * self.keep[ri, cj] / np.float32(1 - self.p)
        if op.fn == "dropout_bwd":
            return x * ins[1] / np.float32(1 - self.p)
        raise AssertionError(op)  # pragma: no cover

    def _softmax(self, op: Op) -> None:  # two passes per row block: (m, l) online, then P = exp(S − m) / l
        mem, x_name = self.mem, op.ins[0]
        for i, ri in self.rows:
            r = ri.stop - ri.start
            m = np.full(r, -np.inf, np.float32)  # running row max, (r,)
            l = np.zeros(r, np.float32)  # running row sum of exp(S − m), (r,)
            mem.scratch("m, l", 2 * r * 4)
            for j, cj in self.cols:
                s = self._masked(mem.load(x_name, rows=ri, cols=cj, tile=(i, j), as_name="x", count_once=True),
                                 op, ri, cj)
                m, l, _ = online_softmax_update(m, l, None, s, None)  # statistics only: P is written in pass 2
                mem.compute(0, tensor=op.out, tile=(i, j), note="online max and sum", stats={"m": m.copy(),
                                                                                         "l": l.copy()})
                mem.free("x")
            for j, cj in self.cols:
                s = self._masked(mem.load(x_name, rows=ri, cols=cj, tile=(i, j), as_name="x", count_once=True),
                                 op, ri, cj)
                mem.scratch("out", s.size * storage_bytes(mem.dtype_of(op.out)))
                p = np.exp(s - m[:, None]) / l[:, None]  # (r, c)
                mem.compute(0, tensor=op.out, tile=(i, j), note=f"{op.out} = exp({x_name} − m) / l")
                mem.store(op.out, p, rows=ri, cols=cj, tile=(i, j))
                mem.free("x", "out")
            mem.free("m, l")

    def _masked(self, s: np.ndarray, op: Op, ri: slice, cj: slice) -> np.ndarray:
        if not op.mask:
            return s
        future = causal_mask(ri.start, ri.stop - ri.start, cj.start, cj.stop - cj.start, always=True)
        return np.where(future, np.float32(-np.inf), s)

    def _softmax_bwd(self, op: Op) -> None:  # D = rowsum(P ∘ dP) in pass 1, dX = P ∘ (dP − D) in pass 2
        mem, (p_name, dp_name) = self.mem, op.ins
        for i, ri in self.rows:
            r = ri.stop - ri.start
            dsum = np.zeros(r, np.float32)  # (r,)
            mem.scratch("D", r * 4)
            for j, cj in self.cols:
                p = mem.load(p_name, rows=ri, cols=cj, tile=(i, j), as_name="p", count_once=True)
                dp = mem.load(dp_name, rows=ri, cols=cj, tile=(i, j), as_name="dp", count_once=True)
                dsum += (p * dp).sum(axis=1)
                mem.compute(0, tensor=op.out, tile=(i, j), note="D += rowsum(P∘dP)", stats={"D": dsum.copy()})
                mem.free("p", "dp")
            for j, cj in self.cols:
                p = mem.load(p_name, rows=ri, cols=cj, tile=(i, j), as_name="p", count_once=True)
                dp = mem.load(dp_name, rows=ri, cols=cj, tile=(i, j), as_name="dp", count_once=True)
                mem.scratch("out", p.size * storage_bytes(mem.dtype_of(op.out)))
                mem.compute(0, tensor=op.out, tile=(i, j), note=f"{op.out} = P∘(dP − D)")
                mem.store(op.out, p * (dp - dsum[:, None]), rows=ri, cols=cj, tile=(i, j))
                mem.free("p", "dp", "out")
            mem.free("D")
