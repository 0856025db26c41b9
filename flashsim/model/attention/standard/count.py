"""Count mode of standard attention: every op's HBM bytes and FLOPs over its tiles, without numbers (chapter 02)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from flashsim.model.attention.standard.blocks import resolve_standard_blocks, tile_set
from flashsim.model.attention.standard.program import EagerOps, Op, Program, program_for
from flashsim.model.attention.visibility import n_blocks
from flashsim.model.memory import Counters, storage_bytes
from flashsim.model.problem import Problem


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


class _Axis(NamedTuple):
    """One axis of the tile grid: its length (Σ of the block sizes), its block count and its largest block."""
    total: int
    blocks: int
    largest: int


def _axis(n: int, block: int) -> _Axis:
    return _Axis(int(n), n_blocks(n, block), min(int(block), int(n)))


def _count_op(op: Op, prog: Program, r: _Axis, c: _Axis, d: int, cnt: Counters) -> None:
    """Add one op's bytes, reuse and FLOPs over the tile grid (row blocks r, column blocks c) to `cnt`, without
    numbers. Only each axis's length, block count and largest block matter, so any N costs O(1) (Python ints)."""
    b = {name: storage_bytes(dt) for name, dt in prog.dtypes.items()}
    tr, tc = r.blocks, c.blocks
    area = r.total * c.total  # Σ_i Σ_j r_i·c_j over the (Tr, Tc) tile grid: every tile's elements
    if op.kind == "gemm_nn":
        a, bb = op.ins
        cnt.add_read(a, r.total * d * b[a])  # A_i first read at j = 0, then on chip
        cnt.add_read(bb, c.total * d * b[bb])  # B_j first read at i = 0
        cnt.reuse_bytes += (tc - 1) * r.total * d * b[a] + (tr - 1) * c.total * d * b[bb]
        cnt.add_write(op.out, area * b[op.out])
        cnt.flops += 2 * area * d
    elif op.kind == "gemm_nd":
        x, y = op.ins
        cnt.add_read(x, area * b[x])
        if op.transpose:  # out_j = Σ_i X_ijᵀ Y_i: Y_i read at j = 0, reused for the other Tc − 1 blocks
            cnt.add_read(y, r.total * d * b[y])
            cnt.reuse_bytes += (tc - 1) * r.total * d * b[y]
            cnt.add_write(op.out, c.total * d * b[op.out])
        else:
            cnt.add_read(y, c.total * d * b[y])
            cnt.reuse_bytes += (tr - 1) * c.total * d * b[y]
            cnt.add_write(op.out, r.total * d * b[op.out])
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
    peak = sum(tile_set(op, prog, r.largest, c.largest, d).values())
    cnt.sram_peak_bytes = max(cnt.sram_peak_bytes, peak)


def count_standard(problem: Problem, eager_ops=None) -> StandardCount:
    """Count mode: the counters of naive or eager attention over all heads, no numbers (chapter 02)."""
    prog, ops = program_for(problem, eager_ops)
    br, bc = resolve_standard_blocks(problem, ops)
    r, c = _axis(problem.n, br), _axis(problem.n, bc)
    fwd = Counters()
    for op in prog.forward:
        _count_op(op, prog, r, c, problem.d, fwd)
    bwd = None
    if problem.backward:
        bwd = Counters()
        for op in prog.backward:
            _count_op(op, prog, r, c, problem.d, bwd)
    fwd, bwd = fwd * problem.batch_heads, (bwd * problem.batch_heads if bwd is not None else None)
    total = fwd + bwd if bwd is not None else fwd + Counters()
    return StandardCount(total, fwd, bwd, br, bc, ops, prog)
