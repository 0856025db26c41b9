"""The simulator's kernel view: the global-memory bytes each Triton kernel of :mod:`flashsim.kernels` requests.

For the same N, d, blocks, causal flag and dtype as a kernel launch, :func:`kernel_io` predicts in closed form
the bytes the kernel loads and stores (counting only elements whose mask is true, exactly as the interpreter's
:func:`flashsim.measure.count_io` counts them), per launch and per tensor. :func:`kernel_dram` feeds the same
kernel's tile trace (:func:`kernel_trace`) through the L2 model of :mod:`flashsim.model.l2` to predict the bytes that
reach DRAM.

Two byte counts per launch and tensor, equal when every row a kernel touches starts on a 32-byte sector:

* ``loads`` / ``stores`` (``load_bytes``, ``store_bytes``): the element bytes the source asks for, masked lanes
  excluded. The Triton interpreter counts these (:func:`flashsim.measure.count_io`).
* ``l1_loads`` / ``l1_stores`` (``l1_load_bytes``, ``l1_store_bytes``): the bytes the GPU's L1 serves, in whole
  32-byte sectors per warp instruction, as Nsight Compute's ``l1tex__t_bytes_pipe_lsu_mem_global_op_ld/st`` count
  them (:func:`l1_io`, measured on the H200). Triton vectorizes an access (16 bytes per thread, one instruction
  per row piece) only when it knows the row stride and the mask bound along the row are multiples of 16
  elements. Otherwise each thread loads one element per instruction, and a row that starts mid-sector costs the
  sectors each instruction touches: up to a quarter more than the element bytes for an fp16 row at N=1000. The
  flash backward pass also loads its row statistics (LSE, delta) once per warp that holds a copy of them.

Kernels and their shapes (``kernel`` names, as the CLI spells them):

* ``flash_fwd``: Q, K, V (batch, heads, n, d) -> O, LSE. One launch.
* ``flash_bwd``: three launches (preprocess, dK/dV, dQ).
* ``naive``: three launches (S = Q Kᵀ, softmax, P V); S and P fp32 (batch, heads, n, n), written in full
  also when causal (only the Q Kᵀ products and P V tiles above the diagonal are skipped).
* ``tiled_matmul``: A (n, d) @ B (d, n) -> C (n, n), ``block_k`` (default 32) along d; causal: C's tiles on or
  below the diagonal.
* ``online_softmax``: X (n, n) -> P (n, n), LSE (n,); causal skips column tiles past the diagonal.

Block sizes are the kernels' ``block_m`` (BLOCK_M, the paper's Br) and ``block_n`` (BLOCK_N, Bc): see
:mod:`flashsim.model.attention.visibility`, which also holds the causal rule every count below uses.

>>> kernel_io("flash_fwd", n=256, d=64, block_m=32, block_n=32, dtype="fp16").load_bytes
557056
>>> kernel_io("flash_fwd", n=256, d=64, block_m=32, block_n=32, dtype="fp16", causal=True).load_bytes
327680
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from flashsim.errors import FlashsimError
from flashsim.model.attention.visibility import (block_extent, first_visible_row_block, n_blocks, tile_sums,
                                                 tile_visible, visible_col_blocks)
from flashsim.model.calibration import (L2_DIRTY_FRACTION, L2_DIRTY_MIX, L2_PROTECTED_FRACTION, L2_SHARED_FRACTION,
                                        L2_TILE_COSTS, LAUNCH_PROGRAMS_PER_SM, PROGRAMS_PER_SM)
from flashsim.model.dtypes import dtype_bytes
from flashsim.model.hardware import get_device
from flashsim.model.l2 import Access, L2Result, simulate_l2

KERNELS = ("naive", "tiled_matmul", "online_softmax", "flash_fwd", "flash_bwd")
F32 = 4


@dataclass
class LaunchIO:
    """Predicted bytes of one kernel launch. ``loads``/``stores`` map kernel argument name -> bytes."""
    name: str
    loads: dict = field(default_factory=dict)
    stores: dict = field(default_factory=dict)
    #: (l1_loads, l1_stores) or a function that returns them: kernel_io computes the sector view when it is
    #: first asked for (at N no multiple of 16 that costs time in proportion to N / block)
    l1: object = field(default=None, repr=False, compare=False)

    @property
    def l1_loads(self) -> dict:
        """{tensor: bytes} the GPU's L1 serves for the loads, in 32-byte sectors (module docstring)."""
        return self._l1()[0]

    @property
    def l1_stores(self) -> dict:
        return self._l1()[1]

    def _l1(self) -> tuple:
        if callable(self.l1):
            self.l1 = self.l1()
        return self.l1 if self.l1 is not None else (dict(self.loads), dict(self.stores))

    @property
    def load_bytes(self) -> int:
        return sum(self.loads.values())

    @property
    def store_bytes(self) -> int:
        return sum(self.stores.values())

    @property
    def l1_load_bytes(self) -> int:
        return sum(self.l1_loads.values())

    @property
    def l1_store_bytes(self) -> int:
        return sum(self.l1_stores.values())

    def add(self, kind: str, tensor: str, nbytes: int) -> None:
        d = self.loads if kind == "load" else self.stores
        d[tensor] = d.get(tensor, 0) + int(nbytes)


@dataclass
class KernelIO:
    """Predicted bytes of a kernel (all its launches)."""
    kernel: str
    launches: list

    @property
    def load_bytes(self) -> int:
        return sum(l.load_bytes for l in self.launches)

    @property
    def store_bytes(self) -> int:
        return sum(l.store_bytes for l in self.launches)

    @property
    def l1_load_bytes(self) -> int:
        return sum(l.l1_load_bytes for l in self.launches)

    @property
    def l1_store_bytes(self) -> int:
        return sum(l.l1_store_bytes for l in self.launches)

    def per_tensor(self) -> dict:
        """{launch name: {"loads": {...}, "stores": {...}}}."""
        return {l.name: {"loads": dict(l.loads), "stores": dict(l.stores)} for l in self.launches}


def _check(kernel, n, d, block_m, block_n, dtype):
    if kernel not in KERNELS:
        raise FlashsimError(f"unknown kernel {kernel!r}: use one of {list(KERNELS)}")
    for name, v in (("n", n), ("d", d), ("block_m", block_m), ("block_n", block_n)):
        if not isinstance(v, int) or v < 1:
            raise FlashsimError(f"{name}={v!r} must be a positive integer")
    return dtype_bytes(dtype)


def kernel_io(kernel: str, n: int, d: int, block_m: int, block_n: int, causal: bool = False, dtype="fp16",
              batch: int = 1, heads: int = 1, block_k: int = 32) -> KernelIO:
    """Closed-form bytes each launch of ``kernel`` requests from global memory (see the module docstring)."""
    es = _check(kernel, n, d, block_m, block_n, dtype)
    launches = getattr(_Requested(n, d, block_m, block_n, causal, es, batch * heads), kernel)()
    if _whole_sectors(n, d, block_m, block_n, block_k):
        for L in launches:
            L.l1 = _element_sectors(L, d, block_m)
    else:
        _defer_sector_view(launches, lambda: l1_io(kernel, n, d, block_m, block_n, causal, dtype, batch, heads,
                                                   block_k))
    return KernelIO(kernel, launches)


class _Requested:
    """One launch geometry and the element bytes its kernels request, for :func:`kernel_io`: one method per
    kernel, each returning that kernel's [LaunchIO] in launch order. The flash and naive kernels run on
    (batch, heads, N, d) tensors; tiled_matmul and online_softmax on one matrix."""

    def __init__(self, n: int, d: int, block_m: int, block_n: int, causal: bool, es: int, bh: int):
        self.N, self.es, self.bh = n, es, bh
        self.row_bytes = d * es                     # one row of Q, K, V, O, dO or a gradient
        self.nd_bytes = bh * n * d * es             # a whole (batch, heads, N, d) tensor
        self.stat_bytes = bh * n * F32              # a whole (batch, heads, N) fp32 statistic (LSE, delta)
        # over the visible tiles: Q rows (Q_i once per tile), K/V rows (K_j, V_j once per tile), S elements
        self.q_rows, self.kv_rows, self.tile_elems = tile_sums(n, block_m, block_n, causal)

    def flash_fwd(self) -> list:
        kv = self.bh * self.kv_rows * self.row_bytes
        return [LaunchIO("_flash_fwd_kernel", {"Q": self.nd_bytes, "K": kv, "V": kv},
                         {"O": self.nd_bytes, "LSE": self.stat_bytes})]

    def flash_bwd(self) -> list:
        nd, stat = self.nd_bytes, self.stat_bytes
        q = self.bh * self.q_rows * self.row_bytes        # Q and dO: each K/V block reads its visible Q blocks
        q_stat = self.bh * self.q_rows * F32              # LSE and delta beside them
        kv = self.bh * self.kv_rows * self.row_bytes      # K and V: each Q block reads its visible K/V blocks
        return [LaunchIO("_bwd_preprocess", {"O": nd, "DO": nd}, {"DELTA": stat}),
                LaunchIO("_bwd_dkdv", {"K": nd, "V": nd, "Q": q, "LSE": q_stat, "DO": q, "DELTA": q_stat},
                         {"DK": nd, "DV": nd}),
                LaunchIO("_bwd_dq", {"Q": nd, "DO": nd, "LSE": stat, "DELTA": stat, "K": kv, "V": kv},
                         {"DQ": nd})]

    def naive(self) -> list:
        bh, row = self.bh, self.row_bytes
        s = bh * self.N * self.N * F32                    # S and P stored whole, causal too: -inf above the diagonal
        return [LaunchIO("_scores_kernel", {"Q": bh * self.q_rows * row, "K": bh * self.kv_rows * row}, {"S": s}),
                LaunchIO("_softmax_kernel", {"S": s}, {"P": s}),
                LaunchIO("_pv_kernel", {"P": bh * self.tile_elems * F32, "V": bh * self.kv_rows * row},
                         {"O": self.nd_bytes})]

    def tiled_matmul(self) -> list:
        # A (n, d) @ B (d, n): C's tiles are S's tiles, so the same visible-tile sums
        return [LaunchIO("_matmul_kernel", {"A": self.q_rows * self.row_bytes, "B": self.kv_rows * self.row_bytes},
                         {"C": self.tile_elems * self.es})]

    def online_softmax(self) -> list:
        x = self.tile_elems * self.es                     # X / P elements of the visible tiles; X is read twice
        return [LaunchIO("_online_softmax_kernel", {"X": 2 * x}, {"P": x, "LSE": self.N * F32})]


def _element_sectors(launch: LaunchIO, d: int, block_m: int) -> tuple:
    """(l1_loads, l1_stores) where every row segment is whole, aligned sectors: the element bytes, the flash
    backward's statistics once per warp that holds them."""
    copies = _bwd_stat_copies(launch.name, d, block_m)
    return ({t: b * (copies if t in ("LSE", "DELTA") else 1) for t, b in launch.loads.items()}, dict(launch.stores))


def _defer_sector_view(launches: list, sector_view) -> None:
    """Give each launch its entry of ``sector_view()`` ([(l1_loads, l1_stores)] per launch), computed once, when a
    launch is first asked for it (at N no multiple of 16 it costs time in proportion to N / block)."""
    view = functools.cache(sector_view)
    for i, L in enumerate(launches):
        L.l1 = (lambda i=i: view()[i])


# --- the L1's view: 32-byte sectors per warp instruction -------------------------------------------------------

SECTOR_BYTES = 32
#: Triton specializes integer arguments divisible by 16: only then may it vectorize along a row
VECTOR_ALIGN_ELEMS = 16


def _residues(start: int, count: int, step: int) -> np.ndarray:
    """Histogram (32 bins) of (start + t*step) mod 32 for t in range(count): where count rows start in a sector."""
    h = np.zeros(SECTOR_BYTES, dtype=np.int64)
    if count <= 0:
        return h
    period = SECTOR_BYTES // np.gcd(step % SECTOR_BYTES, SECTOR_BYTES) if step % SECTOR_BYTES else 1
    one = (start + step * np.arange(min(period, count), dtype=np.int64)) % SECTOR_BYTES
    full, rest = divmod(count, period)
    np.add.at(h, one, full)
    np.add.at(h, one[:rest], 1)
    return h


def _fold(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Histogram of (x + y) mod 32 from the histograms of x and of y."""
    c = np.convolve(a, b)
    out = c[:SECTOR_BYTES].copy()
    out[:len(c) - SECTOR_BYTES] += c[SECTOR_BYTES:]
    return out


def _segment_sectors(c0_bytes: int, n_el: int, es: int, vectorized: bool, vec: int, lanes: int) -> np.ndarray:
    """Sectors one row segment of ``n_el`` elements costs, for each row start offset 0..31 (bytes in a sector).

    Vectorized: one instruction per row piece, so the sectors the segment spans. Not: the row is cut into pieces
    of ``vec * lanes`` elements (a warp's lanes along the row, ``vec`` elements each), and each of a thread's
    ``vec`` elements is its own instruction, which touches the sectors of every ``vec``-th element of the piece.
    """
    o = np.arange(SECTOR_BYTES, dtype=np.int64)[:, None] + c0_bytes
    if vectorized:
        return ((o[:, 0] + n_el * es + SECTOR_BYTES - 1) // SECTOR_BYTES - o[:, 0] // SECTOR_BYTES)
    total = np.zeros(SECTOR_BYTES, dtype=np.int64)
    piece = vec * lanes
    for p0 in range(0, n_el, piece):
        for k in range(min(vec, n_el - p0)):
            e = np.arange(p0 + k, min(n_el, p0 + piece), vec, dtype=np.int64)
            sec = (o + e[None, :] * es) // SECTOR_BYTES                   # (32, elements): nondecreasing rows
            total += 1 + (np.diff(sec, axis=1) != 0).sum(axis=1)
    return total


class _L1Counter:
    """Sums the L1 sector bytes of row segments of one tensor: ``add(r0, rows, c0, cols, times)``.

    The tensor's rows are ``row_stride`` elements apart and its ``heads`` copies ``head_stride`` apart (element
    units); each added segment is read (or written) by all heads, ``times`` times."""

    def __init__(self, es: int, heads: int, head_stride: int, row_stride: int, vectorized: bool, vec: int = 1,
                 lanes: int = 32):
        self.es, self.rs, self.vectorized, self.vec, self.lanes = es, row_stride, vectorized, vec, lanes
        self.heads = _residues(0, heads, head_stride * es)
        self.segs: dict = {}
        self.sectors = 0

    def add(self, r0: int, rows: int, c0: int, cols: int, times: int = 1) -> None:
        if times <= 0 or rows <= 0 or cols <= 0:
            return
        hist = _fold(self.heads, _residues(r0 * self.rs * self.es, rows, self.rs * self.es))
        key = ((c0 * self.es) % SECTOR_BYTES, cols)
        seg = self.segs.get(key)
        if seg is None:
            seg = self.segs[key] = _segment_sectors(key[0], cols, self.es, self.vectorized, self.vec, self.lanes)
        self.sectors += times * int(hist @ seg)

    @property
    def bytes(self) -> int:
        return SECTOR_BYTES * self.sectors


def _aligned(*elems: int) -> bool:
    return all(e % VECTOR_ALIGN_ELEMS == 0 for e in elems)


def _whole_sectors(n: int, d: int, *blocks: int) -> bool:
    """N, d and the blocks multiples of 16 elements: every access vectorizes and every row segment is whole,
    aligned 32-byte sectors (at 2 or more bytes per element)."""
    return _aligned(n, d, *blocks)


def _padded_d(d: int) -> int:
    """The kernels' head-dim block: d rounded up to a power of two, at least 16 (``BLOCK_D``)."""
    return max(16, 1 << max(0, d - 1).bit_length())


def _bwd_stat_copies(kernel: str, d: int, block_m: int) -> int:
    """Warps that each load the flash backward's row statistics (LSE, delta) of a Q block, on the H200.

    In ``_bwd_dq`` the statistics sit in the row layout of the MMA tile, and every warp along its columns holds a
    copy. From 64 rows it is a warpgroup MMA with its warps along the rows: a 64-row block's rows are spread over 4
    warps, and the other warps hold copies (8 warps at a padded head dim of 128: 2 copies). Below 64 rows Triton
    gives S the warp layout of the dot it chains into, dQ (block_m × padded d): all warps along the rows when that
    tile is at least as tall as it is wide (a 32-row block at d ≤ 32: 2 copies over 4 warps), else all along the
    columns (every warp holds the block whole). ``_bwd_dkdv`` reads them along its tile's columns, once. Measured
    with Nsight Compute (Triton 3.6, sm_90), the launches' own block sizes given."""
    d_pad = _padded_d(d)
    warps = 8 if d_pad >= 128 else 4
    if kernel == "_bwd_dq":
        along_rows = block_m >= 64 or block_m >= d_pad
        return warps // min(warps, block_m // 16) if along_rows else warps
    return 1


#: (elements per thread, lanes along the vector) of the flash backward's statistics where they may not vectorize:
#: the MMA row layout in _bwd_dq (8 rows per warp instruction), its column layout in _bwd_dkdv (pairs of columns
#: over 4 lanes)
_BWD_STAT_LAYOUT = {"_bwd_dq": (1, 8), "_bwd_dkdv": (2, 4)}


def _vector_elems(es: int) -> int:
    """Elements of one 16-byte vector access."""
    return max(1, 16 // es)


def l1_io(kernel: str, n: int, d: int, block_m: int, block_n: int, causal: bool = False, dtype="fp16",
          batch: int = 1, heads: int = 1, block_k: int = 32) -> list:
    """Per launch of ``kernel``: (l1_loads, l1_stores), {tensor: bytes the L1 serves in 32-byte sectors}.

    The same accesses as :func:`kernel_io`, costed per warp instruction (module docstring). Equal to the element
    bytes when N and d are multiples of 16 and every row segment is whole sectors."""
    es = _check(kernel, n, d, block_m, block_n, dtype)
    return getattr(_L1Launch(n, d, block_m, block_n, causal, es, batch * heads, block_k), kernel)()


class _L1Launch:
    """One launch geometry and the ways its kernels walk their tensors, for :func:`l1_io`: one method per kernel,
    each returning that kernel's [(l1_loads, l1_stores)] per launch."""

    def __init__(self, n: int, d: int, block_m: int, block_n: int, causal: bool, es: int, bh: int, block_k: int):
        self.N, self.d, self.bm, self.bn, self.es, self.bh, self.block_k = n, d, block_m, block_n, es, bh, block_k
        self.tm, self.tn = n_blocks(n, block_m), n_blocks(n, block_n)
        self.vc = [visible_col_blocks(i, block_m, block_n, n, causal) for i in range(self.tm)]  # col blocks row i sees
        self.vr = [self.tm - first_visible_row_block(j, block_m, block_n, causal)                # row blocks col j sees
                   for j in range(self.tn)]

    def counter(self, e, hs, rs, aligned, **kw) -> _L1Counter:
        return _L1Counter(e, self.bh, hs, rs, aligned, **kw)

    def nd(self, aligned=None) -> _L1Counter:
        """A (heads, N, d) tensor, rows d elements apart."""
        c = self.counter(self.es, self.N * self.d, self.d, _aligned(self.d) if aligned is None else aligned)
        c.width = self.d
        return c

    def stat(self, launch=None) -> _L1Counter:
        """A (heads, N) fp32 statistic (in its layout in a backward launch)."""
        vec, lanes = _BWD_STAT_LAYOUT.get(launch, (1, 32))
        return self.counter(F32, self.N, 0, _aligned(self.N), vec=vec, lanes=lanes)

    def rows_of(self, cnt, block, per_block) -> None:
        """Each block of rows of a (heads, N, d) tensor, ``per_block(t)`` times, its whole row width."""
        for t in range(n_blocks(self.N, block)):
            cnt.add(t * block, block_extent(t, block, self.N), 0, cnt.width, per_block(t))

    def vector(self, cnt, block, per_block) -> None:
        """A 1-D (heads, N) tensor: block t's elements, ``per_block(t)`` times."""
        for t in range(n_blocks(self.N, block)):
            cnt.add(0, 1, t * block, block_extent(t, block, self.N), per_block(t))

    def tiles(self, cnt, visible_cols) -> None:
        """(heads, N, N) tiles: row block i, its ``visible_cols(i)`` column blocks."""
        N, bm, bn = self.N, self.bm, self.bn
        for i in range(self.tm):
            r = block_extent(i, bm, N)
            full = min(visible_cols(i), N // bn)
            cnt.add(i * bm, r, 0, bn, full) if (bn * cnt.es) % SECTOR_BYTES == 0 else [
                cnt.add(i * bm, r, j * bn, bn) for j in range(full)]
            if visible_cols(i) > full:
                cnt.add(i * bm, r, full * bn, N - full * bn)

    def flash_fwd(self) -> list:
        bm, bn, vr = self.bm, self.bn, self.vr
        once = (lambda t: 1)
        out = []
        q, k, v, o, lse = self.nd(), self.nd(), self.nd(), self.nd(), self.stat()
        self.rows_of(q, bm, once)
        self.rows_of(k, bn, lambda j: vr[j])
        self.rows_of(v, bn, lambda j: vr[j])
        self.rows_of(o, bm, once)
        self.vector(lse, bm, once)
        out.append(({"Q": q.bytes, "K": k.bytes, "V": v.bytes}, {"O": o.bytes, "LSE": lse.bytes}))
        return out

    def flash_bwd(self) -> list:
        bm, bn, d, vc, vr = self.bm, self.bn, self.d, self.vc, self.vr
        once = (lambda t: 1)
        out = []
        o, do, delta = self.nd(), self.nd(), self.stat()
        self.rows_of(o, bm, once)
        self.rows_of(do, bm, once)
        self.vector(delta, bm, once)
        out.append(({"O": o.bytes, "DO": do.bytes}, {"DELTA": delta.bytes}))
        k, v, q, do2, dk, dv = self.nd(), self.nd(), self.nd(), self.nd(), self.nd(), self.nd()
        lse, dl = self.stat("_bwd_dkdv"), self.stat("_bwd_dkdv")
        self.rows_of(k, bn, once)
        self.rows_of(v, bn, once)
        self.rows_of(q, bm, lambda i: vc[i])
        self.rows_of(do2, bm, lambda i: vc[i])
        copies = _bwd_stat_copies("_bwd_dkdv", d, bm)
        self.vector(lse, bm, lambda i: vc[i] * copies)
        self.vector(dl, bm, lambda i: vc[i] * copies)
        self.rows_of(dk, bn, once)
        self.rows_of(dv, bn, once)
        out.append(({"K": k.bytes, "V": v.bytes, "Q": q.bytes, "LSE": lse.bytes, "DO": do2.bytes,
                     "DELTA": dl.bytes}, {"DK": dk.bytes, "DV": dv.bytes}))
        q, do, k, v, dq = self.nd(), self.nd(), self.nd(), self.nd(), self.nd()
        lse, dl = self.stat("_bwd_dq"), self.stat("_bwd_dq")
        self.rows_of(q, bm, once)
        self.rows_of(do, bm, once)
        copies = _bwd_stat_copies("_bwd_dq", d, bm)
        self.vector(lse, bm, lambda i: copies)
        self.vector(dl, bm, lambda i: copies)
        self.rows_of(k, bn, lambda j: vr[j])
        self.rows_of(v, bn, lambda j: vr[j])
        self.rows_of(dq, bm, once)
        out.append(({"Q": q.bytes, "DO": do.bytes, "LSE": lse.bytes, "DELTA": dl.bytes, "K": k.bytes,
                     "V": v.bytes}, {"DQ": dq.bytes}))
        return out

    def naive(self) -> list:
        N, bm, bn, d, tn, vc, vr = self.N, self.bm, self.bn, self.d, self.tn, self.vc, self.vr
        once = (lambda t: 1)
        out = []
        q, k, s = self.nd(), self.nd(), self.counter(F32, N * N, N, _aligned(N))
        self.rows_of(q, bm, lambda i: vc[i])
        self.rows_of(k, bn, lambda j: vr[j])
        self.tiles(s, lambda i: tn)                                   # S is stored whole, causal too
        out.append(({"Q": q.bytes, "K": k.bytes}, {"S": s.bytes}))
        s2, p = self.counter(F32, N * N, N, _aligned(N)), self.counter(F32, N * N, N, _aligned(N))
        for c in (s2, p):
            c.add(0, N, 0, N)
        out.append(({"S": s2.bytes}, {"P": p.bytes}))
        # Triton gives a load the elements per thread of a same-shaped access it feeds: when the P tile has the O
        # tile's shape (BLOCK_N = the padded d), P gets O's 4 (the kernel's max_contiguous) and, where it may not
        # vectorize, loads them in 4 instructions across the tile's width
        p_vec = 4 if bn == _padded_d(d) and _aligned(d) else 1
        p2 = self.counter(F32, N * N, N, _aligned(N), vec=p_vec, lanes=max(1, min(32, bn // p_vec)))
        v, o = self.nd(), self.nd()
        self.tiles(p2, lambda i: vc[i])
        self.rows_of(v, bn, lambda j: vr[j])
        self.rows_of(o, bm, once)
        out.append(({"P": p2.bytes, "V": v.bytes}, {"O": o.bytes}))
        return out

    def tiled_matmul(self) -> list:
        N, bm, bn, d, es, tm, tn = self.N, self.bm, self.bn, self.d, self.es, self.tm, self.tn
        vc, vr, block_k = self.vc, self.vr, self.block_k
        out = []
        # Triton gives a load the elements per thread of a same-shaped access beside it: A's (bm, block_k) and
        # B's (block_k, bn) tiles, when equal, both take the larger (16 bytes where either may vectorize); the one
        # that may not then loads them in that many instructions across the tile's width
        vec_a, vec_b = (_vector_elems(es) if _aligned(x) else 1 for x in (d, N))
        if (bm, block_k) == (block_k, bn):
            vec_a = vec_b = max(vec_a, vec_b)
        a = _L1Counter(es, 1, 0, d, _aligned(d), vec=vec_a, lanes=max(1, min(32, block_k // vec_a)))
        b = _L1Counter(es, 1, 0, N, _aligned(N), vec=vec_b, lanes=max(1, min(32, bn // vec_b)))
        c = _L1Counter(es, 1, 0, N, _aligned(N))
        for i in range(tm):
            for k0 in range(0, d, block_k):
                a.add(i * bm, block_extent(i, bm, N), k0, min(block_k, d - k0), vc[i])
        for j in range(tn):
            for k0 in range(0, d, block_k):
                b.add(k0, min(block_k, d - k0), j * bn, block_extent(j, bn, N), vr[j])
        self.tiles(c, lambda i: vc[i])
        out.append(({"A": a.bytes, "B": b.bytes}, {"C": c.bytes}))
        return out

    def online_softmax(self) -> list:
        N, bm, es, tm, vc = self.N, self.bm, self.es, self.tm, self.vc
        out = []
        x = _L1Counter(es, 1, 0, N, _aligned(N))
        p = _L1Counter(es, 1, 0, N, _aligned(N))
        lse = _L1Counter(F32, 1, 0, 0, _aligned(N))
        self.tiles(x, lambda i: vc[i])
        self.tiles(p, lambda i: vc[i])
        for i in range(tm):
            lse.add(0, 1, i * bm, block_extent(i, bm, N))
        out.append(({"X": 2 * x.bytes}, {"P": p.bytes, "LSE": lse.bytes}))
        return out


# --- tile traces for the L2 model ---------------------------------------------------------------------------

def kernel_trace(kernel: str, n: int, d: int, block_m: int, block_n: int, causal: bool = False, dtype="fp16",
                 batch: int = 1, heads: int = 1, block_k: int = 32, softmax_rows: int | None = None):
    """Per launch: (launch name, list of programs in launch order, each a list of :class:`flashsim.model.l2.Access`).

    Tile byte counts are the masked bytes of each load/store, so each launch's trace sums to :func:`kernel_io`.
    """
    es = _check(kernel, n, d, block_m, block_n, dtype)
    trace = _TraceLaunch(n, d, block_m, block_n, causal, es, batch * heads, block_k, softmax_rows)
    return getattr(trace, kernel)()


class _TraceLaunch:
    """One launch geometry and its tile walks, for :func:`kernel_trace`: one method per kernel, each returning
    [(launch name, programs)] in launch order."""

    def __init__(self, n, d, block_m, block_n, causal, es, bh_n, block_k, softmax_rows):
        self.N, self.d, self.bm, self.bn, self.causal, self.es = n, d, block_m, block_n, causal, es
        self.bh_n, self.block_k, self.softmax_rows = bh_n, block_k, softmax_rows
        self.tm, self.tn = n_blocks(n, block_m), n_blocks(n, block_n)
        # causal flash_fwd and _bwd_dq launch their Q row blocks last first (the longest programs first)
        self.q_order = range(self.tm - 1, -1, -1) if causal else range(self.tm)

    def kv_blocks(self, i):
        """The K/V blocks Q row block i visits."""
        return range(visible_col_blocks(i, self.bm, self.bn, self.N, self.causal))

    def kv_stream(self, h, i):
        """A Q row block's walk over K_j, V_j (flash_fwd, _bwd_dq)."""
        N, bn, d, es = self.N, self.bn, self.d, self.es
        return [a for j in self.kv_blocks(i) for a in (Access(("K", h, j), block_extent(j, bn, N) * d * es),
                                                       Access(("V", h, j), block_extent(j, bn, N) * d * es))]

    def flash_fwd(self) -> list:
        N, bm, d, es, bh_n = self.N, self.bm, self.d, self.es, self.bh_n
        out = []
        progs = []
        for h in range(bh_n):
            for i in self.q_order:
                r = block_extent(i, bm, N)
                p = [Access(("Q", h, i), r * d * es)] + self.kv_stream(h, i)
                p += [Access(("O", h, i), r * d * es, True), Access(("LSE", h, i), r * F32, True)]
                progs.append(p)
        out.append(("_flash_fwd_kernel", progs))
        return out

    def flash_bwd(self) -> list:
        N, bm, bn, d, es, bh_n, tm, tn = self.N, self.bm, self.bn, self.d, self.es, self.bh_n, self.tm, self.tn
        causal = self.causal
        out = []
        pre = []
        for h in range(bh_n):
            for i in range(tm):
                r = block_extent(i, bm, N)
                pre.append([Access(("O", h, i), r * d * es), Access(("DO", h, i), r * d * es),
                            Access(("DELTA", h, i), r * F32, True)])
        out.append(("_bwd_preprocess", pre))
        dkdv = []
        for h in range(bh_n):
            for j in range(tn):
                c = block_extent(j, bn, N)
                p = [Access(("K", h, j), c * d * es), Access(("V", h, j), c * d * es)]
                for i in range(first_visible_row_block(j, bm, bn, causal), tm):
                    r = block_extent(i, bm, N)
                    p += [Access(("Q", h, i), r * d * es), Access(("LSE", h, i), r * F32),
                          Access(("DO", h, i), r * d * es), Access(("DELTA", h, i), r * F32)]
                p += [Access(("DK", h, j), c * d * es, True), Access(("DV", h, j), c * d * es, True)]
                dkdv.append(p)
        out.append(("_bwd_dkdv", dkdv))
        dq = []
        for h in range(bh_n):
            for i in self.q_order:
                r = block_extent(i, bm, N)
                p = [Access(("Q", h, i), r * d * es), Access(("DO", h, i), r * d * es),
                     Access(("LSE", h, i), r * F32), Access(("DELTA", h, i), r * F32)] + self.kv_stream(h, i)
                p.append(Access(("DQ", h, i), r * d * es, True))
                dq.append(p)
        out.append(("_bwd_dq", dq))
        return out

    def naive(self) -> list:
        N, bm, bn, d = self.N, self.bm, self.bn, self.d
        es, bh_n, tm, tn, softmax_rows = self.es, self.bh_n, self.tm, self.tn, self.softmax_rows
        causal = self.causal
        out = []
        sc = []
        for h in range(bh_n):
            for j in range(tn):
                for i in range(tm):
                    r, c = block_extent(i, bm, N), block_extent(j, bn, N)
                    if not tile_visible(i, j, bm, bn, N, causal):
                        sc.append([Access(("S", h, i, j), r * c * F32, True)])
                        continue
                    sc.append([Access(("Q", h, i), r * d * es), Access(("K", h, j), c * d * es),
                               Access(("S", h, i, j), r * c * F32, True)])
        out.append(("_scores_kernel", sc))
        rows = softmax_rows if softmax_rows else max(1, min(16, 16384 // (1 << max(0, N - 1).bit_length())))
        sm = []
        for h in range(bh_n):
            for i in range(n_blocks(N, rows)):
                el = (min(N, (i + 1) * rows) - i * rows) * N
                sm.append([Access(("S", h, i), el * F32), Access(("P", h, i), el * F32, True)])
        out.append(("_softmax_kernel", sm))
        pv = []
        for h in range(bh_n):
            for i in range(tm):
                r = block_extent(i, bm, N)
                p = []
                for j in self.kv_blocks(i):
                    c = block_extent(j, bn, N)
                    p += [Access(("P", h, i, j), r * c * F32), Access(("V", h, j), c * d * es)]
                p.append(Access(("O", h, i), r * d * es, True))
                pv.append(p)
        out.append(("_pv_kernel", pv))
        return out

    def tiled_matmul(self) -> list:
        N, bm, bn, d, es, tm, tn, block_k = self.N, self.bm, self.bn, self.d, self.es, self.tm, self.tn, self.block_k
        causal = self.causal
        out = []
        progs = []
        for j in range(tn):
            for i in range(tm):
                if not tile_visible(i, j, bm, bn, N, causal):
                    progs.append([])
                    continue
                r, c = block_extent(i, bm, N), block_extent(j, bn, N)
                p = []
                for k0 in range(0, d, block_k):
                    kk = min(block_k, d - k0)
                    p += [Access(("A", i, k0), r * kk * es), Access(("B", k0, j), kk * c * es)]
                p.append(Access(("C", i, j), r * c * es, True))
                progs.append(p)
        out.append(("_matmul_kernel", progs))
        return out

    def online_softmax(self) -> list:
        N, bm, bn, es, tm = self.N, self.bm, self.bn, self.es, self.tm
        out = []
        progs = []
        for i in range(tm):
            r = block_extent(i, bm, N)
            tiles = []
            for j in self.kv_blocks(i):
                tiles.append((j, r * block_extent(j, bn, N)))
            p = [Access(("X", i, j), el * es) for j, el in tiles]
            p += [a for j, el in tiles for a in (Access(("X", i, j), el * es), Access(("P", i, j), el * es, True))]
            p.append(Access(("LSE", i), r * F32, True))
            progs.append(p)
        out.append(("_online_softmax_kernel", progs))
        return out


def launch_programs_per_sm(launch: str, default: int = PROGRAMS_PER_SM) -> int:
    """Programs of ``launch`` resident per SM in the L2 model: LAUNCH_PROGRAMS_PER_SM, else ``default``
    (both from :mod:`flashsim.model.calibration`)."""
    return LAUNCH_PROGRAMS_PER_SM.get(launch, default)


class L2Settings(NamedTuple):
    """The L2 model's settings for the kernel view (defaults: the calibration table, :mod:`flashsim.model.calibration`).

    ``programs_per_sm``: programs resident per SM (None: each launch's own, :func:`launch_programs_per_sm`);
    ``l2_fraction``: the share of the L2 the model uses; ``protected_fraction``: the segmented LRU's protected
    share (None: one plain LRU); ``tile_costs``: (shared, private, written), the L2 capacity per byte of a tile
    several programs touch, one program only reads, one program writes; ``dirty_fraction``: the most bytes kept
    dirty, as a share of the L2 (None: no limit); ``dirty_mix``: (c0, c1), that limit scaled by min(1, c0 + c1 × the
    write share of recent L2 fills) (None: fixed); ``flush_writes``: count the dirty bytes left at the end as written
    (every write reaches DRAM once) rather than only those written back while the kernel runs."""
    programs_per_sm: int | None = None
    l2_fraction: float = L2_SHARED_FRACTION
    protected_fraction: float | None = L2_PROTECTED_FRACTION
    tile_costs: tuple = L2_TILE_COSTS
    dirty_fraction: float | None = L2_DIRTY_FRACTION
    dirty_mix: tuple | None = L2_DIRTY_MIX
    flush_writes: bool = False


def simulate_launch(programs, concurrency: int, hw, settings: L2Settings | None = None) -> L2Result:
    """One launch's programs through :func:`flashsim.model.l2.simulate_l2` on GPU ``hw`` (a Hardware) under
    ``settings`` (:class:`L2Settings`, the calibrated model by default): ``l2_bytes × l2_fraction`` of cache,
    at most ``l2_bytes × dirty_fraction`` bytes dirty, ``concurrency`` programs resident. The kernel view's
    launches (:func:`kernel_dram`) and the Gluon kernels' (:mod:`flashsim.measure.gluon_io`) go through it."""
    cfg = settings or L2Settings()
    shared, private, written = cfg.tile_costs
    dirty_limit = None if cfg.dirty_fraction is None else int(hw.l2_bytes * cfg.dirty_fraction)
    return simulate_l2(programs, max(1, int(hw.l2_bytes * cfg.l2_fraction)), concurrency,
                       flush_writes=cfg.flush_writes, protected_fraction=cfg.protected_fraction, shared_cost=shared,
                       private_cost=private, write_cost=written, dirty_limit=dirty_limit, dirty_mix=cfg.dirty_mix)


def kernel_dram(kernel: str, n: int, d: int, block_m: int, block_n: int, causal: bool = False, dtype="fp16",
                batch: int = 1, heads: int = 1, block_k: int = 32, hardware="h200",
                settings: L2Settings | None = None, **changes) -> dict:
    """DRAM bytes of each launch predicted by the L2 model: {launch name: L2Result, ..., "total": L2Result}.

    Each launch is simulated from a cold L2 with :func:`flashsim.model.l2.simulate_l2` under ``settings``
    (:class:`L2Settings`, the calibrated model by default), with any of its fields changed by keyword
    (``kernel_dram(..., flush_writes=True)``): ``num_sms × programs_per_sm`` programs resident, ``l2_bytes ×
    l2_fraction`` of cache, at most ``l2_bytes × dirty_fraction`` bytes dirty. The L2 is write-back: with
    ``flush_writes=False`` (the default) a result counts the dirty tiles written back while the kernel runs, which is
    what Nsight Compute measures for one kernel (dirty lines still in the L2 when it ends are written back later,
    outside its measurement); ``flush_writes=True`` charges every written byte to the kernel. Either way each
    result's ``dirty_end_bytes`` says how many were still dirty at the end.
    """
    unknown = sorted(set(changes) - set(L2Settings._fields))
    if unknown:
        raise FlashsimError(f"kernel_dram: unknown L2 setting(s) {unknown}: use {list(L2Settings._fields)}")
    cfg = (settings or L2Settings())._replace(**changes)
    hw = get_device(hardware)
    res = {}
    total = L2Result()
    for name, progs in kernel_trace(kernel, n, d, block_m, block_n, causal, dtype, batch, heads, block_k):
        per_sm = launch_programs_per_sm(name) if cfg.programs_per_sm is None else cfg.programs_per_sm
        r = simulate_launch(progs, hw.num_sms * per_sm, hw, cfg)
        res[name] = r
        total = total + r
    res["total"] = total
    return res
