"""FlashAttention's on-chip tile set and the block sizes that fit it (chapter 05).

The SRAM a thread block holds at once is defined here once (:func:`sram_tile_bytes`) and used by the capacity
check, count mode and (through :class:`~flashsim.model.memory.Memory`) step mode. :func:`resolve_blocks` picks
each algorithm's default blocks (FA1's §3.1 rule, FA2's outer block as large as SRAM allows) or checks explicit
ones. Block names: Br = ``block_r``, Bc = ``block_c``
(the vocabulary is stated in :mod:`flashsim.model.attention.visibility`).
"""
from __future__ import annotations

from flashsim.errors import FlashsimError
from flashsim.model.dtypes import dtype_bytes
from flashsim.model.memory import check_tile_set_fits, largest_fitting_block

FLASH_ALGOS = ("flash1", "flash2")
ACC_BYTES = 4  # fp32: S/P tiles, accumulators and the running m, l are fp32 on chip
#: FA2's default inner block is never chosen below this while the outer block is sized: 16 is the narrowest
#: tile a tensor-core matrix product (and Triton's tl.dot) takes, so a wider outer block is not bought with
#: inner blocks no GPU would run.
MIN_INNER_BLOCK = 16


def sram_tile_bytes(block_r: int, block_c: int, d: int, dtype="fp16", stats_dtype="fp32", algo: str = "flash2",
                    backward: bool = False, *, phase: str | None = None) -> dict:
    """The SRAM tiles one thread block holds at once, name → bytes (chapter 05).

    Tiles loaded from HBM keep their storage dtype (b bytes, bs for statistics); on-chip intermediates are fp32:
    the S/P tile (Br×Bc), the O accumulator (Br×d) and flash2's running m, l; in the backward the dP/dS tile and
    the dK, dV accumulators (Bc×d).

    phase: "forward", "backward" (the main loop) or "preprocess" (flash2's D = rowsum(dO∘O) pass); default
    "backward" if `backward` else "forward".
    """
    algo = check_algo(algo)
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


def phases(algo: str, backward: bool) -> list[str]:
    if not backward:
        return ["forward"]
    return ["forward", "preprocess", "backward"] if algo == "flash2" else ["forward", "backward"]


def sram_peak_bytes(block_r: int, block_c: int, d: int, dtype="fp16", stats_dtype="fp32", algo: str = "flash2",
                    backward: bool = False) -> int:
    """Largest tile-set total over the phases that run (forward, and preprocess/backward when asked)."""
    return max(sum(sram_tile_bytes(block_r, block_c, d, dtype, stats_dtype, algo, phase=ph).values())
               for ph in phases(check_algo(algo), backward))


def check_algo(algo: str) -> str:
    algo = str(algo).lower()
    if algo not in FLASH_ALGOS:
        raise FlashsimError(f"unknown flash algo {algo!r}: use one of {list(FLASH_ALGOS)}")
    return algo


def _check_fits(problem, block_r: int, block_c: int) -> None:
    """Raise SramCapacityError naming bytes needed, available and the largest block that would fit.

    The tiles are sized by the rows actually loaded: a block larger than N holds N rows (block_r=128 at N=69 is
    a 69-row tile, accepted wherever 69 is)."""
    cap = problem.sram_bytes
    args = (problem.d, problem.dtype, problem.stats_dtype, problem.algo)
    for ph in phases(problem.algo, problem.backward):
        tiles = sram_tile_bytes(min(block_r, problem.n), min(block_c, problem.n), *args, phase=ph)
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
    """(block_r, block_c) for a flash problem: explicit blocks are checked against SRAM, None gets the algorithm's
    own rule (:func:`fa1_default_blocks`, :func:`fa2_default_blocks`).

    Each rule's blocks are powers of two, clipped to the padded size (N rounded up to a power of two, so that a
    block is always a power of two: N=127 gets the blocks of N=128, one ragged block of 127 rows), and fit every
    phase's tile set sized by the rows actually loaded (min(block, N)). So traffic grows with N instead of jumping
    at N = 127 vs 128 as clipping to N itself made it. Only the blocks not given are chosen.
    A block given explicitly is kept as given (a block larger than N simply makes one ragged block of N rows, and
    is checked as such); if its tile set does not fit, SramCapacityError says by how much and which block would.
    """
    check_algo(problem.algo)
    br, bc = problem.block_r, problem.block_c
    for name, val in (("block_r", br), ("block_c", bc)):
        if val is not None and (isinstance(val, bool) or int(val) != val or val <= 0):
            raise FlashsimError(f"{name}={val!r} must be a positive integer, e.g. {name}=64")
    if br is None or bc is None:
        rule = fa2_default_blocks if problem.algo == "flash2" else fa1_default_blocks
        br, bc = rule(problem, br, bc)
    br, bc = int(br), int(bc)
    _check_fits(problem, br, bc)
    return br, bc


def _fits(problem):
    """fits(r, c): every phase's tile set, at the rows loaded (a block past N holds N rows), fits in SRAM."""
    n, args = problem.n, (problem.d, problem.dtype, problem.stats_dtype, problem.algo)
    return lambda r, c: all(sum(sram_tile_bytes(min(r, n), min(c, n), *args, phase=ph).values()) <= problem.sram_bytes
                            for ph in phases(problem.algo, problem.backward))


def _paper_blocks(problem) -> tuple[int, int, int]:
    """(⌈M/(4d)⌉, min(⌈M/(4d)⌉, d), N padded to a power of two), M the SRAM size in elements of the storage dtype."""
    m_elems = problem.sram_bytes // problem.elem_bytes
    big = max(-(-m_elems // (4 * problem.d)), 1)
    return big, min(big, problem.d), 1 << max(0, problem.n - 1).bit_length()


def fa1_default_blocks(problem, br=None, bc=None) -> tuple[int, int]:
    """FA1's rule (§3.1): Bc = ⌈M/(4d)⌉, Br = min(⌈M/(4d)⌉, d), rounded down to powers of two, clipped to the padded
    N, then halved (the larger first) until every phase fits. A block given (not None) is kept.

    FA1's outer loop runs over K/V blocks (Bc): each K_j, V_j is read once, and Q, O, m, l are re-read and re-written
    once per K/V block, so its traffic falls as Bc grows; Br, the streamed block, only has to be small enough.
    """
    big, small, n_pad = _paper_blocks(problem)
    fits = _fits(problem)
    auto_r, auto_c = br is None, bc is None
    if auto_c:
        bc = min(_pow2_floor(big), n_pad)
    if auto_r:
        br = min(_pow2_floor(small), n_pad)
    while not fits(br, bc):  # halve what was not given explicitly, the larger first
        if auto_c and bc > 1 and (bc >= br or not auto_r or br == 1):
            bc //= 2
        elif auto_r and br > 1:
            br //= 2
        else:
            break  # cannot shrink further: _check_fits explains
    return br, bc


def fa2_default_blocks(problem, br=None, bc=None) -> tuple[int, int]:
    """FA2's forward rule: the outer loop's block Br as large as SRAM allows, then Bc as large as still fits.

    FA2's forward runs its outer loop over Q blocks (Br): each Q_i is read and O_i written once, and K, V are
    re-read once per Q block, so the forward's HBM traffic is about 2Nd·b·(1 + N/Br): it falls as Br grows and
    does not depend on Bc. FA1's rule caps Br at d, which was right for FA1 (Br was its streamed block) and makes
    FA2 re-read K and V N/d times. Here Br is the largest power of two (≤ the padded N) whose tile set fits with
    Bc = :data:`MIN_INNER_BLOCK`; Bc is then the largest power of two up to FA1's min(⌈M/(4d)⌉, d) that still fits.
    A block given (not None) is kept and the other chosen around it.

    With ``backward=True`` one pair serves two loops that want opposite shapes: the forward re-reads K, V once per
    Q block (large Br) and FA2's backward re-reads Q, dO, dQ once per K/V block (large Bc). There FA1's balanced
    rule (:func:`fa1_default_blocks`) is kept; chapter 07 moves the blocks by hand.
    """
    if problem.backward:
        return fa1_default_blocks(problem, br, bc)
    _, small, n_pad = _paper_blocks(problem)
    fits = _fits(problem)

    def largest(fit, cap):  # the largest power of two ≤ cap with fit(x), else 1
        x = 1
        while x * 2 <= cap and fit(x * 2):
            x *= 2
        return x

    if br is None:
        floor = bc if bc is not None else min(MIN_INNER_BLOCK, n_pad, _pow2_floor(small))
        br = largest(lambda r: fits(r, floor), n_pad)
    if bc is None:
        bc = largest(lambda c: fits(br, c), min(_pow2_floor(small), n_pad))
    return br, bc


def _pow2_floor(x: int) -> int:
    return 1 << (int(x).bit_length() - 1) if x >= 1 else 1


def effective_peak(problem, br, bc, which=None) -> tuple[int, dict]:
    """Peak SRAM over the phases `which` (default: all that run): the largest tile set at the sizes actually
    loaded (a block larger than N holds only N rows)."""
    r, c = min(br, problem.n), min(bc, problem.n)
    best, best_tiles = -1, {}
    for ph in which or phases(problem.algo, problem.backward):
        tiles = sram_tile_bytes(r, c, problem.d, problem.dtype, problem.stats_dtype, problem.algo, phase=ph)
        if sum(tiles.values()) > best:
            best, best_tiles = sum(tiles.values()), tiles
    return best, best_tiles
