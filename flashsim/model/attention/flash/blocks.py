"""FlashAttention's on-chip tile set and the block sizes that fit it (chapter 05).

The SRAM a thread block holds at once is defined here once (:func:`sram_tile_bytes`) and used by the capacity
check, count mode and (through :class:`~flashsim.model.memory.Memory`) step mode. :func:`resolve_blocks` picks
FA1's default blocks (§3.1) or checks explicit ones. Block names: Br = ``block_r``, Bc = ``block_c``
(the vocabulary is stated in :mod:`flashsim.model.attention.visibility`).
"""
from __future__ import annotations

from flashsim.errors import FlashsimError
from flashsim.model.dtypes import dtype_bytes
from flashsim.model.memory import check_tile_set_fits, largest_fitting_block

FLASH_ALGOS = ("flash1", "flash2")
ACC_BYTES = 4  # fp32: S/P tiles, accumulators and the running m, l are fp32 on chip


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
    """(block_r, block_c) for a flash problem: explicit blocks are checked against SRAM, None gets FA1's rule.

    FA1 §3.1: Bc = ⌈M/(4d)⌉, Br = min(Bc, d), with M the SRAM size in elements of the storage dtype. Each is then
    rounded down to a power of two, clipped to the padded size (N rounded up to a power of two, so that a block
    is always a power of two: N=127 gets the blocks of N=128, one ragged block of 127 rows), and halved (the
    larger first) until every phase's tile set, sized by the rows actually loaded (min(block, N)), fits. So
    traffic grows with N instead of jumping at N = 127 vs 128 as clipping to N itself made it.
    A block given explicitly is kept as given (a block larger than N simply makes one ragged block of N rows, and
    is checked as such); if its tile set does not fit, SramCapacityError says by how much and which block would.
    """
    check_algo(problem.algo)
    n, d = problem.n, problem.d
    br, bc = problem.block_r, problem.block_c
    for name, val in (("block_r", br), ("block_c", bc)):
        if val is not None and (isinstance(val, bool) or int(val) != val or val <= 0):
            raise FlashsimError(f"{name}={val!r} must be a positive integer, e.g. {name}=64")
    cap = problem.sram_bytes
    args = (d, problem.dtype, problem.stats_dtype, problem.algo)

    def fits(r, c):  # at the rows loaded: a block past N holds N rows
        return all(sum(sram_tile_bytes(min(r, n), min(c, n), *args, phase=ph).values()) <= cap
                   for ph in phases(problem.algo, problem.backward))

    if br is None or bc is None:
        m_elems = cap // problem.elem_bytes  # M: SRAM size in elements of the storage dtype
        paper_c = max(-(-m_elems // (4 * d)), 1)  # Bc = ⌈M/(4d)⌉
        paper_r = min(paper_c, d)  # Br = min(⌈M/(4d)⌉, d)
        n_pad = 1 << max(0, n - 1).bit_length()  # N rounded up to a power of two
        auto_c, auto_r = bc is None, br is None
        if auto_c:
            bc = min(_pow2_floor(paper_c), n_pad)
        if auto_r:
            br = min(_pow2_floor(paper_r), n_pad)
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
