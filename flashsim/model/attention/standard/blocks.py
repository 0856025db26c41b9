"""The SRAM each op of a standard-attention program holds per tile, and the blocks that fit (chapter 02).

Block names: Br = ``block_r`` rows, Bc = ``block_c`` columns (the vocabulary:
:mod:`flashsim.model.attention.visibility`).
"""
from __future__ import annotations

from flashsim.errors import FlashsimError
from flashsim.model.attention.standard.program import DEFAULT_MAX_BLOCK, Op, Program, program_for
from flashsim.model.memory import check_tile_set_fits, largest_fitting_block, storage_bytes
from flashsim.model.problem import Problem


def tile_set(op: Op, prog: Program, r: int, c: int, d: int) -> dict:
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


def sram_peak(prog: Program, n: int, d: int, block_r: int, block_c: int) -> tuple[int, Op, dict]:
    """Largest tile set of the program: (bytes, op, tile set). Tile sets grow with r and c: the first tile."""
    r, c = min(block_r, n), min(block_c, n)
    best = (0, None, {})
    for op in prog.forward + prog.backward:
        tiles = tile_set(op, prog, r, c, d)
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
    prog, _ = program_for(problem, eager_ops)
    n, d, cap = problem.n, problem.d, problem.sram_bytes
    br, bc = problem.block_r, problem.block_c
    if br is None or bc is None:
        def need(block: int) -> int:
            return sram_peak(prog, n, d, br or block, bc or block)[0]
        block = largest_fitting_block(need, cap, start=DEFAULT_MAX_BLOCK)
        if block == 0:
            raise FlashsimError(f"no tile of {problem.algo} fits in {cap} bytes of SRAM at d={d}, "
                                f"dtype={problem.dtype}: use a larger sram_bytes or smaller d")
        br, bc = br or block, bc or block
    peak, op, tiles = sram_peak(prog, n, d, br, bc)
    if peak > cap:
        fit = largest_fitting_block(lambda blk: sram_peak(prog, n, d, blk, blk)[0], cap, start=max(br, bc))
        fix = (f"use block_r = block_c ≤ {fit} (or leave them unset)" if fit
               else f"no tile fits at d={d}: use a larger sram_bytes")
        check_tile_set_fits(tiles, cap, device_name=f"{problem.hardware.name} (op {op.out})",
                            fix=f"{problem.algo} tiles block_r={br}, block_c={bc} are too big: {fix}")
    return br, bc
