"""The Gluon kernels' bytes (chapter 14): what each launch requests, and what the L2 model says reaches DRAM when it
is fed the tile order the kernel really runs.

The Gluon forward and backward (:mod:`flashsim.kernels.gluon`) move their tiles by TMA (global -> shared memory,
and the backward's dQ reduce-adds shared -> global), which the L1's global-load counters never see, and store their
outputs (O and LSE; dK and dV) by ordinary stores, which they do. So each launch is predicted as

- ``lsu_load_bytes`` / ``lsu_store_bytes``: the L1's 32-byte sectors per warp instruction of the pointer loads and
  stores (what Nsight Compute's ``l1tex__t_bytes_pipe_lsu_mem_global_op_ld/st`` count). The stores go out from the
  wgmma accumulator layout: a warp instruction writes 8 rows x 16 bytes (4 lanes x 2 elements of 2 bytes per row),
  each 16-byte piece in its own sector, so an O (dK, dV) row of d elements costs 2·d·e sector bytes; a row
  statistic (LSE) goes out as 8 consecutive fp32 per instruction. The persistent forward's tile lists
  (``BALANCED``) are read by every warp: one 4-byte load, one sector, per tile and warp. (As read in the SASS of
  an offline sm_90 compile, benchmarks/experiments/gluon_compile_sm90.py --sass: O, LSE, dK and dV go out as
  32-bit STG.E, 16 (O, d=64) and 2 (LSE) per consumer thread; the balanced forward has 3 LDG.E per partition,
  start[p], start[p + 1] and order[i]; every tile and the dQ add move by UTMALDG / UTMAREDG.)
  The two plain Triton passes of the backward are read the same way (an offline sm_90 compile of
  flashsim/kernels/gluon/bwd_host.py, its TTGIR layouts and SASS). The dQ epilogue loads fp32 and stores 16-bit
  through the same offsets; Triton's coalescing gives the load the store's 16-byte vector (8 elements a thread, a
  layout ``sizePerThread = [8]``), which the fp32 load issues as two LDG.E.128 a thread, its lanes 32 bytes apart:
  each 16-byte piece in a sector of its own, so the accumulator costs twice its bytes in sectors
  (:func:`strided_vector_load_bytes`). The prologue's row statistics (L copied, delta stored) are 1-D tensors of
  BLOCK_M fp32 in a layout of 32 lanes x 4 warps, one element a lane: a warp instruction is 32 consecutive fp32 (its
  own sectors, so a row block misaligned by 16 bytes costs a sector more per instruction), and with fewer rows than
  threads the other warps hold copies: their stores are masked off, their loads are issued
  (:func:`row_vector_bytes`).
- ``tma_load_bytes`` / ``tma_reduce_bytes``: the TMA boxes, each row inside the tensor once (rows past the
  tensor's end are not fetched; rows past a head's N belong to the next head and are).
- ``dram_read_bytes`` / ``dram_write_bytes``: the L2 model as :func:`flashsim.model.kernel_io.kernel_dram` runs it
  (:func:`flashsim.model.kernel_io.simulate_launch`, the calibrated constants, none refitted), fed per CTA the tiles
  it really walks: the forward's persistent CTAs with their tile lists (:func:`flashsim.kernels.gluon.fwd_tile_list`,
  the balanced lists of :func:`~flashsim.kernels.gluon.balanced_tile_lists`, heads in L2 sections), the backward's
  CTAs in launch order (key blocks inner, one CTA per SM), and the host passes around it (prologue, dQ epilogue) as
  the streams they are.

Launch names are the kernels' own (what ncu reports): ``attn_fwd_sm90``; ``_gluon_bwd_prologue``,
``attn_bwd_sm90``, ``_gluon_dq_epilogue``. Needs numpy only (no torch, no GPU): the launch configuration comes
from the same tables the kernels launch with.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from flashsim.errors import FlashsimError
from flashsim.kernels import gluon as G
from flashsim.model.hardware import get_device
from flashsim.model.kernel_io import L2Settings, simulate_launch
from flashsim.model.l2 import Access

SECTOR = 32
ELEMENT_BYTES = {"fp16": 2, "bf16": 2}
#: elements per program of the dQ epilogue, and the padded row pitch of L and delta: the values of
#: flashsim.kernels.gluon.bwd_host (EPILOGUE_BLOCK, n_lse_of), which imports torch; tests check they agree
EPILOGUE_BLOCK = 4096
#: threads of one program of the host passes (num_warps=4 in bwd_host), and lanes of a warp
HOST_THREADS, WARP_LANES = 128, 32
#: the widest vector one thread loads or stores in one instruction (LDG.E.128 / STG.E.128)
VECTOR_BYTES = 16
#: the L2 model's settings for the Gluon launches (the calibrated model; flush_writes False: ncu's window)
SETTINGS = L2Settings()


def n_lse_of(N: int) -> int:
    """N rounded up to a multiple of 4 fp32 (16 bytes): the LSE_SMEM rows' pitch."""
    return -(-N // 4) * 4


#: launches of one call, in order
FWD_LAUNCHES = ("attn_fwd_sm90",)
BWD_LAUNCHES = ("_gluon_bwd_prologue", "attn_bwd_sm90", "_gluon_dq_epilogue")


@dataclass
class LaunchIO:
    """One launch's predicted bytes (see the module docstring)."""
    name: str
    lsu_load_bytes: int = 0
    lsu_store_bytes: int = 0
    tma_load_bytes: int = 0
    tma_reduce_bytes: int = 0
    dram_read_bytes: int = 0
    dram_write_bytes: int = 0
    dram_write_flushed_bytes: int = 0
    ctas: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


# --- sector arithmetic ---------------------------------------------------------------------------------------------

def _sectors(first_byte: np.ndarray, nbytes: np.ndarray) -> np.ndarray:
    """Sectors a contiguous range of ``nbytes`` from ``first_byte`` touches (0 for an empty range)."""
    first_byte, nbytes = np.asarray(first_byte, np.int64), np.asarray(nbytes, np.int64)
    last = first_byte + np.maximum(nbytes, 1) - 1
    return np.where(nbytes > 0, last // SECTOR - first_byte // SECTOR + 1, 0)


def accumulator_store_bytes(valid_rows: int, d: int, es: int) -> int:
    """L1 sector bytes of storing ``valid_rows`` rows of d elements from a wgmma accumulator layout: each row in
    pieces of 16 bytes, each piece its own sector (see the module docstring)."""
    return SECTOR * valid_rows * (d * es // 16)


def row_stat_store_bytes(row0: int, rows: int, n_valid: int, group: int = 8) -> int:
    """L1 sector bytes of storing fp32 row statistics for rows ``row0 .. row0 + rows - 1`` of a flat fp32 array,
    ``group`` consecutive rows per warp instruction, rows at or past ``n_valid`` (flat index) masked off."""
    starts = row0 + np.arange(0, rows, group, dtype=np.int64)
    valid = np.clip(np.minimum(starts + group, n_valid) - starts, 0, group)
    return int(SECTOR * _sectors(starts * 4, valid * 4).sum())


def strided_vector_load_bytes(numel, es_out: int, es_in: int = 4) -> int:
    """L1 sector bytes of loading ``numel`` consecutive elements of ``es_in`` bytes in a layout that gives each
    thread the 16-byte store vector of ``es_out``-byte elements (VECTOR_BYTES // es_out elements): wider than one
    16-byte load, so each thread issues several, its lanes that many 16-byte pieces apart, and each piece of a warp
    instruction lies in a sector of its own. ``numel`` may be an array (one program each)."""
    per_thread_bytes = (VECTOR_BYTES // es_out) * es_in
    numel = np.asarray(numel, np.int64)
    if per_thread_bytes <= VECTOR_BYTES:                     # one load a thread: lanes contiguous
        return int(SECTOR * _sectors(np.zeros_like(numel), numel * es_in).sum())
    pieces = -(-numel * es_in // VECTOR_BYTES)               # 16-byte pieces with a valid element
    return int(SECTOR * pieces.sum())


def row_vector_bytes(first_elem: int, rows: int, n_valid: int, block: int, load: bool) -> int:
    """L1 sector bytes of one host-pass program's access to ``rows`` fp32 row statistics from flat element
    ``first_elem`` (``n_valid`` of them inside the mask), held one a lane over HOST_THREADS threads: a warp
    instruction per WARP_LANES consecutive elements; with ``block`` < HOST_THREADS the further warps hold copies
    of the first ones, whose loads are issued and whose stores are masked off."""
    starts = np.arange(0, rows, WARP_LANES, dtype=np.int64)
    counts = np.clip(np.minimum(starts + WARP_LANES, n_valid) - starts, 0, WARP_LANES)
    one = int(SECTOR * _sectors((first_elem + starts) * 4, counts * 4).sum())
    return one * max(1, HOST_THREADS // block) if load else one


def _box_rows(row0, rows: int, total_rows: int):
    """Rows of a TMA box starting at ``row0`` that lie inside a tensor of ``total_rows`` rows."""
    return np.clip(np.minimum(np.asarray(row0, np.int64) + rows, total_rows) - row0, 0, rows)


# --- the L2 model with the fitted constants -----------------------------------------------------------------------

def _dram(io: LaunchIO, programs, concurrency: int, hw) -> LaunchIO:
    r = simulate_launch(programs, concurrency, hw, SETTINGS)
    io.dram_read_bytes, io.dram_write_bytes = int(r.dram_read_bytes), int(r.dram_write_bytes)
    io.dram_write_flushed_bytes = int(r.dram_write_bytes + r.dirty_end_bytes)
    return io


def _check(B: int, H: int, N: int, d: int, dtype: str):
    if dtype not in ELEMENT_BYTES:
        raise FlashsimError(f"dtype {dtype!r}: the Gluon kernels take fp16 or bf16")
    if d not in G.HEAD_DIMS:
        raise FlashsimError(f"head dim {d}: the Gluon kernels cover d in {G.HEAD_DIMS}")
    if min(B, H, N) < 1:
        raise FlashsimError(f"B={B}, H={H}, N={N}: each must be >= 1")
    return ELEMENT_BYTES[dtype]


# --- the forward ----------------------------------------------------------------------------------------------------

def forward_schedule(B: int, H: int, N: int, d: int, dtype: str = "fp16", causal: bool = False, hardware="h200"):
    """The persistent forward's launch as :func:`flashsim.kernels.gluon.gluon_forward` makes it: (cfg, consts,
    ctas, per-CTA lists of (batch*head, query block)). The tile list is :func:`~flashsim.kernels.gluon.fwd_tile_list`
    (heads in L2 sections), dealt to the CTAs by stride or by :func:`~flashsim.kernels.gluon.balanced_tile_lists`."""
    es = _check(B, H, N, d, dtype)
    hw = get_device(hardware)
    cfg = G.forward_config(d, causal, N)
    consts = G.fwd_constexprs(cfg, causal, d)
    nc, block_m, block_n = consts["NC"], consts["BLOCK_M"], consts["BLOCK_N"]
    BH, n_mblk = B * H, -(-N // (nc * block_m))
    n_tiles = BH * n_mblk
    sec = max(1, min(BH, cfg.get("L2_SECTION_BYTES", G.L2_SECTION_BYTES) // (2 * N * d * es)))
    ctas = min(n_tiles, hw.num_sms)
    bh_of, mblk_of = G.fwd_tile_list(BH, n_mblk, sec)
    if consts["BALANCED"]:
        method = cfg["BALANCED"] if isinstance(cfg["BALANCED"], str) else "list"
        costs = G.fwd_tile_kv_tiles(N, BH, n_mblk, sec, causal, nc * block_m, block_n) + G.TILE_OVERHEAD_KV_TILES
        order, start = G.balanced_tile_lists(costs, ctas, method, section_tiles=sec * n_mblk)
        lists = [order[start[p]:start[p + 1]] for p in range(ctas)]
    else:
        lists = [np.arange(p, n_tiles, ctas) for p in range(ctas)]
    tiles = [[(int(bh_of[t]), int(mblk_of[t])) for t in lst] for lst in lists]
    return cfg, consts, ctas, tiles


def forward_io(B: int, H: int, N: int, d: int, dtype: str = "fp16", causal: bool = False, hardware="h200",
               dram: bool = True) -> list[LaunchIO]:
    """The Gluon forward's one launch (``attn_fwd_sm90``), predicted."""
    es = ELEMENT_BYTES.get(dtype, 2)
    hw = get_device(hardware)
    cfg, consts, ctas, tiles = forward_schedule(B, H, N, d, dtype, causal, hardware)
    nc, block_m, block_n = consts["NC"], consts["BLOCK_M"], consts["BLOCK_N"]
    cta_m, total_rows = nc * block_m, B * H * N
    io = LaunchIO(FWD_LAUNCHES[0], ctas=ctas)
    programs = []
    for mine in tiles:
        acc = []

        def q_boxes(bh, mblk, keep=True):
            for c in range(nc):
                r0 = bh * N + mblk * cta_m + c * block_m
                nbytes = int(_box_rows(r0, block_m, total_rows)) * d * es
                io.tma_load_bytes += nbytes
                if keep and nbytes:
                    acc.append(Access(("Q", bh, mblk, c), nbytes))

        def kv_box(name, bh, j):
            nbytes = int(_box_rows(bh * N + j * block_n, block_n, total_rows)) * d * es
            io.tma_load_bytes += nbytes
            if nbytes:
                acc.append(Access((name, bh, j), nbytes))

        for bh, mblk in mine:
            q_boxes(bh, mblk)
            hi = min((mblk + 1) * cta_m, N) if causal else N
            n_kv = -(-hi // block_n)
            kv_box("K", bh, 0)
            for j in range(n_kv):
                if j + 1 < n_kv:
                    kv_box("K", bh, j + 1)
                kv_box("V", bh, j)
            for c in range(nc):
                q0 = mblk * cta_m + c * block_m
                rows = max(0, min(block_m, N - q0))
                io.lsu_store_bytes += accumulator_store_bytes(rows, d, es)
                io.lsu_store_bytes += sum(row_stat_store_bytes(bh * N + q0 + 16 * w, 16, bh * N + N)
                                          for w in range(4))
                if rows:
                    acc.append(Access(("O", bh, mblk, c), rows * d * es, True))
                    acc.append(Access(("L", bh, mblk, c), rows * 4, True))
        # after its last tile the producer loads one more Q and K_0 (of its first tile): S_0 computed and dropped
        bh0, mblk0 = mine[0]
        q_boxes(bh0, mblk0)
        kv_box("K", bh0, 0)
        if consts["BALANCED"]:     # every warp reads the list: start[p], start[p + 1], then order[...] per tile
            warps_consumers, warps_producer = 4 * nc, 1
            io.lsu_load_bytes += SECTOR * (warps_consumers * (2 + len(mine)) + warps_producer * (3 + len(mine)))
        programs.append(acc)
    return [_dram(io, programs, ctas, hw) if dram else io]


# --- the backward ---------------------------------------------------------------------------------------------------

def backward_io(B: int, H: int, N: int, d: int, dtype: str = "fp16", causal: bool = False, hardware="h200",
                dram: bool = True) -> list[LaunchIO]:
    """The Gluon backward's three launches as :func:`flashsim.kernels.gluon.gluon_backward` makes them (delta
    computed by the prologue from O and dO), predicted."""
    es = _check(B, H, N, d, dtype)
    hw = get_device(hardware)
    cfg = {**G.BWD_CONFIG_DEFAULTS, **G.BWD_CONFIGS[(d, bool(causal))]}
    if not (cfg["LSE_SMEM"] and cfg["DQ_TMA"]) or cfg["REVERSE"]:
        raise FlashsimError("backward_io models the committed backward (LSE_SMEM, DQ_TMA, REVERSE off): "
                            f"BWD_CONFIGS[({d}, {causal})] is {cfg}")
    BH = B * H
    n_lse = n_lse_of(N)
    return [_prologue_io(BH, N, d, es, n_lse, hw, dram), _bwd_main_io(BH, N, d, es, causal, cfg, n_lse, hw, dram),
            _epilogue_io(BH * N * d, es, hw, dram)]


def _prologue_io(BH, N, d, es, n_lse, hw, dram) -> LaunchIO:
    """``_gluon_bwd_prologue``: per (row block, head) program O and dO read, delta written into padded rows, L
    copied into padded rows where N is no multiple of 4, the fp32 dQ accumulator zeroed."""
    block_m = max(16, min(128, 4096 // d))        # d is a power of two here: BLOCK_D = d
    copy_lse = n_lse != N
    io = LaunchIO(BWD_LAUNCHES[0], ctas=-(-n_lse // block_m) * BH)
    programs = []
    for bh in range(BH):
        for pid in range(-(-n_lse // block_m)):
            r0 = pid * block_m
            rows = max(0, min(block_m, N - r0))
            lse_rows = max(0, min(block_m, n_lse - r0))
            acc = []
            io.lsu_load_bytes += 2 * rows * d * es                     # O, dO: whole rows, 16-byte vectors
            io.lsu_store_bytes += rows * d * 4                         # dq_acc zeros
            io.lsu_store_bytes += row_vector_bytes(bh * n_lse + r0, block_m, lse_rows, block_m, False)   # delta
            if copy_lse:
                io.lsu_load_bytes += row_vector_bytes(bh * N + r0, block_m, rows, block_m, True)
                io.lsu_store_bytes += row_vector_bytes(bh * n_lse + r0, block_m, lse_rows, block_m, False)
            if rows:
                acc += [Access(("O", bh, pid), rows * d * es), Access(("dO", bh, pid), rows * d * es)]
                if copy_lse:
                    acc.append(Access(("Lin", bh, pid), rows * 4))
                acc.append(Access(("dQacc", bh, pid), rows * d * 4, True))
            if lse_rows:
                acc.append(Access(("delta", bh, pid), lse_rows * 4, True))
                if copy_lse:
                    acc.append(Access(("L", bh, pid), lse_rows * 4, True))
            programs.append(acc)
    return _dram(io, programs, hw.num_sms * 8, hw) if dram else io


def _bwd_main_io(BH, N, d, es, causal, cfg, n_lse, hw, dram) -> LaunchIO:
    """``attn_bwd_sm90``: CTA = (K/V block, head), key blocks inner; K, V once, then per query block L, delta, Q,
    dO by TMA and one dQ reduce-add; dK, dV stored at the end."""
    block_m, block_n = cfg["BLOCK_M"], 128
    n_kblk, n_qblk = -(-N // block_n), -(-N // block_m)
    total_rows, total_lse = BH * N, BH * n_lse
    io = LaunchIO(BWD_LAUNCHES[1], ctas=n_kblk * BH)
    programs = []
    for pid in range(n_kblk * BH):
        nblk, bh = pid % n_kblk, pid // n_kblk
        row0 = bh * N
        acc = []
        kv = int(_box_rows(row0 + nblk * block_n, block_n, total_rows)) * d * es
        io.tma_load_bytes += 2 * kv
        acc += [Access(("K", bh, nblk), kv), Access(("V", bh, nblk), kv)]
        lo = (nblk * block_n) // block_m if causal else 0
        for i in range(lo, n_qblk):
            stat = int(_box_rows(bh * n_lse + i * block_m, block_m, total_lse)) * 4
            qd = int(_box_rows(row0 + i * block_m, block_m, total_rows)) * d * es
            dq = int(_box_rows(row0 + i * block_m, block_m, total_rows)) * d * 4
            io.tma_load_bytes += 2 * stat + 2 * qd
            io.tma_reduce_bytes += dq
            acc += [Access(("L", bh, i), stat), Access(("delta", bh, i), stat), Access(("Q", bh, i), qd),
                    Access(("dO", bh, i), qd), Access(("dQacc", bh, i), dq), Access(("dQacc", bh, i), dq, True)]
        rows = max(0, min(block_n, N - nblk * block_n))
        io.lsu_store_bytes += 2 * accumulator_store_bytes(rows, d, es)          # dK, dV
        if rows:
            acc += [Access(("dK", bh, nblk), rows * d * es, True), Access(("dV", bh, nblk), rows * d * es, True)]
        programs.append(acc)
    return _dram(io, programs, hw.num_sms, hw) if dram else io


def _epilogue_io(numel, es, hw, dram) -> LaunchIO:
    """``_gluon_dq_epilogue``: the fp32 accumulator read once, dQ written once, EPILOGUE_BLOCK elements a program;
    the load in the store's layout costs twice the accumulator's bytes in L1 sectors (see the module docstring)."""
    n_prog = -(-numel // EPILOGUE_BLOCK)
    io = LaunchIO(BWD_LAUNCHES[2], ctas=n_prog)
    starts = np.arange(n_prog, dtype=np.int64) * EPILOGUE_BLOCK
    counts = np.minimum(starts + EPILOGUE_BLOCK, numel) - starts
    io.lsu_load_bytes = strided_vector_load_bytes(counts, es)      # fp32 read in the 16-bit store's layout
    io.lsu_store_bytes = int(SECTOR * _sectors(starts * es, counts * es).sum())
    programs = [[Access(("acc", p), int(c) * 4), Access(("dQ", p), int(c) * es, True)] for p, c in enumerate(counts)]
    return _dram(io, programs, hw.num_sms * 8, hw) if dram else io


def launch_io(kernel: str, B: int, H: int, N: int, d: int, dtype: str = "fp16", causal: bool = False,
              hardware="h200", dram: bool = True) -> list[LaunchIO]:
    """``kernel`` "fwd" or "bwd": its launches, predicted (:func:`forward_io`, :func:`backward_io`)."""
    if kernel == "fwd":
        return forward_io(B, H, N, d, dtype, causal, hardware, dram)
    if kernel == "bwd":
        return backward_io(B, H, N, d, dtype, causal, hardware, dram)
    raise FlashsimError(f"kernel {kernel!r}: use 'fwd' or 'bwd'")


__all__ = ["LaunchIO", "FWD_LAUNCHES", "BWD_LAUNCHES", "forward_schedule", "forward_io", "backward_io", "launch_io",
           "accumulator_store_bytes", "row_stat_store_bytes", "strided_vector_load_bytes", "row_vector_bytes"]
