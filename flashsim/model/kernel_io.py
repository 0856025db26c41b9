"""The simulator's kernel view: the global-memory bytes each Triton kernel of :mod:`flashsim.kernels` requests.

For the same N, d, blocks, causal flag and dtype as a kernel launch, :func:`kernel_io` predicts in closed form
the bytes the kernel loads and stores (counting only elements whose mask is true, exactly as the interpreter's
:func:`flashsim.measure.count_io` counts them), per launch and per tensor. :func:`kernel_dram` feeds the same
kernel's tile trace (:func:`kernel_trace`) through the L2 model of :mod:`flashsim.model.l2` to predict the bytes that
reach DRAM.

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

from dataclasses import dataclass, field

from flashsim.errors import FlashsimError
from flashsim.model.attention.visibility import (block_extent, first_visible_row_block, n_blocks, tile_sums,
                                                 tile_visible, visible_col_blocks)
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

    @property
    def load_bytes(self) -> int:
        return sum(self.loads.values())

    @property
    def store_bytes(self) -> int:
        return sum(self.stores.values())

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
    bh = batch * heads
    N, bm, bn = n, block_m, block_n
    nd = N * d * es
    kv_rows = tile_sums(N, bm, bn, causal)[1]  # K/V rows loaded over all Q blocks (visible tiles)
    launches = []
    if kernel == "flash_fwd":
        L = LaunchIO("_flash_fwd_kernel")
        L.add("load", "Q", bh * nd)
        L.add("load", "K", bh * kv_rows * d * es)
        L.add("load", "V", bh * kv_rows * d * es)
        L.add("store", "O", bh * nd)
        L.add("store", "LSE", bh * N * F32)
        launches = [L]
    elif kernel == "flash_bwd":
        P = LaunchIO("_bwd_preprocess")
        P.add("load", "O", bh * nd)
        P.add("load", "DO", bh * nd)
        P.add("store", "DELTA", bh * N * F32)
        KV = LaunchIO("_bwd_dkdv")
        KV.add("load", "K", bh * nd)
        KV.add("load", "V", bh * nd)
        q_rows = tile_sums(N, bm, bn, causal)[0]  # Q rows over the visible tiles (each K/V block's Q blocks)
        KV.add("load", "Q", bh * q_rows * d * es)
        KV.add("load", "LSE", bh * q_rows * F32)
        KV.add("load", "DO", bh * q_rows * d * es)
        KV.add("load", "DELTA", bh * q_rows * F32)
        KV.add("store", "DK", bh * nd)
        KV.add("store", "DV", bh * nd)
        DQ = LaunchIO("_bwd_dq")
        DQ.add("load", "Q", bh * nd)
        DQ.add("load", "DO", bh * nd)
        DQ.add("load", "LSE", bh * N * F32)
        DQ.add("load", "DELTA", bh * N * F32)
        DQ.add("load", "K", bh * kv_rows * d * es)
        DQ.add("load", "V", bh * kv_rows * d * es)
        DQ.add("store", "DQ", bh * nd)
        launches = [P, KV, DQ]
    elif kernel == "naive":
        S = LaunchIO("_scores_kernel")
        q_rows, k_rows, p_el = tile_sums(N, bm, bn, causal)  # over visible tiles: Q rows, K rows, P elements
        S.add("load", "Q", bh * q_rows * d * es)
        S.add("load", "K", bh * k_rows * d * es)
        S.add("store", "S", bh * N * N * F32)           # causal too: tiles above the diagonal store -inf
        SM = LaunchIO("_softmax_kernel")
        SM.add("load", "S", bh * N * N * F32)
        SM.add("store", "P", bh * N * N * F32)
        PV = LaunchIO("_pv_kernel")
        PV.add("load", "P", bh * p_el * F32)
        PV.add("load", "V", bh * kv_rows * d * es)
        PV.add("store", "O", bh * nd)
        launches = [S, SM, PV]
    elif kernel == "tiled_matmul":
        L = LaunchIO("_matmul_kernel")  # A (n, d) @ B (d, n): C tiles are S tiles, so the same visible-tile sums
        a_rows, b_cols, c_el = tile_sums(N, bm, bn, causal)
        L.add("load", "A", a_rows * d * es)
        L.add("load", "B", b_cols * d * es)
        L.add("store", "C", c_el * es)
        launches = [L]
    elif kernel == "online_softmax":
        elems = tile_sums(N, bm, bn, causal)[2]  # X / P elements of the visible tiles
        L = LaunchIO("_online_softmax_kernel")
        L.add("load", "X", 2 * elems * es)
        L.add("store", "P", elems * es)
        L.add("store", "LSE", N * F32)
        launches = [L]
    return KernelIO(kernel, launches)


# --- tile traces for the L2 model ---------------------------------------------------------------------------

def kernel_trace(kernel: str, n: int, d: int, block_m: int, block_n: int, causal: bool = False, dtype="fp16",
                 batch: int = 1, heads: int = 1, block_k: int = 32, softmax_rows: int | None = None):
    """Per launch: (launch name, list of programs in launch order, each a list of :class:`flashsim.model.l2.Access`).

    Tile byte counts are the masked bytes of each load/store, so each launch's trace sums to :func:`kernel_io`.
    """
    es = _check(kernel, n, d, block_m, block_n, dtype)
    bh_n = batch * heads
    N, bm, bn = n, block_m, block_n
    tm, tn = n_blocks(N, bm), n_blocks(N, bn)

    def kv_blocks(i):  # the K/V blocks Q row block i visits
        return range(visible_col_blocks(i, bm, bn, N, causal))

    def kv_stream(h, i):  # a Q row block's walk over K_j, V_j (flash_fwd, _bwd_dq)
        return [a for j in kv_blocks(i) for a in (Access(("K", h, j), block_extent(j, bn, N) * d * es),
                                                  Access(("V", h, j), block_extent(j, bn, N) * d * es))]

    out = []
    # causal flash_fwd and _bwd_dq launch their Q row blocks last first (the longest programs first)
    q_order = range(tm - 1, -1, -1) if causal else range(tm)
    if kernel == "flash_fwd":
        progs = []
        for h in range(bh_n):
            for i in q_order:
                r = block_extent(i, bm, N)
                p = [Access(("Q", h, i), r * d * es)] + kv_stream(h, i)
                p += [Access(("O", h, i), r * d * es, True), Access(("LSE", h, i), r * F32, True)]
                progs.append(p)
        out.append(("_flash_fwd_kernel", progs))
    elif kernel == "flash_bwd":
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
            for i in q_order:
                r = block_extent(i, bm, N)
                p = [Access(("Q", h, i), r * d * es), Access(("DO", h, i), r * d * es),
                     Access(("LSE", h, i), r * F32), Access(("DELTA", h, i), r * F32)] + kv_stream(h, i)
                p.append(Access(("DQ", h, i), r * d * es, True))
                dq.append(p)
        out.append(("_bwd_dq", dq))
    elif kernel == "naive":
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
                for j in kv_blocks(i):
                    c = block_extent(j, bn, N)
                    p += [Access(("P", h, i, j), r * c * F32), Access(("V", h, j), c * d * es)]
                p.append(Access(("O", h, i), r * d * es, True))
                pv.append(p)
        out.append(("_pv_kernel", pv))
    elif kernel == "tiled_matmul":
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
    elif kernel == "online_softmax":
        progs = []
        for i in range(tm):
            r = block_extent(i, bm, N)
            tiles = []
            for j in kv_blocks(i):
                tiles.append((j, r * block_extent(j, bn, N)))
            p = [Access(("X", i, j), el * es) for j, el in tiles]
            p += [a for j, el in tiles for a in (Access(("X", i, j), el * es), Access(("P", i, j), el * es, True))]
            p.append(Access(("LSE", i), r * F32, True))
            progs.append(p)
        out.append(("_online_softmax_kernel", progs))
    return out


#: Programs resident per SM assumed by the L2 model. The flash kernels at GPU block sizes (BLOCK_M=128, d=128,
#: K/V tiles double/triple-buffered) use most of an SM's shared memory and register file: one program per SM
#: (calibrated against Nsight Compute's DRAM bytes, see benchmarks/results/kernels_h200_2026-11-29.md).
PROGRAMS_PER_SM = 1

#: Fraction of the L2 that holds data all SMs share. H100/H200 split the L2 into two partitions; a line one SM
#: reads from the far partition is also kept in the near one, so data read by every SM (K/V tiles) fills both
#: halves: about half the L2 is usable for it (calibrated, see benchmarks/results/kernels_h200_2026-11-29.md).
L2_SHARED_FRACTION = 0.5


def kernel_dram(kernel: str, n: int, d: int, block_m: int, block_n: int, causal: bool = False, dtype="fp16",
                batch: int = 1, heads: int = 1, block_k: int = 32, hardware="h200",
                programs_per_sm: int = PROGRAMS_PER_SM, l2_fraction: float = L2_SHARED_FRACTION,
                flush_writes: bool = False) -> dict:
    """DRAM bytes of each launch predicted by the L2 model: {launch name: L2Result, ..., "total": L2Result}.

    Each launch is simulated from a cold L2 with :func:`flashsim.model.l2.simulate_l2`, ``num_sms × programs_per_sm``
    programs resident and ``l2_bytes × l2_fraction`` of cache. ``flush_writes=False`` (the default) counts the
    writes evicted to DRAM while the kernel runs, which is what Nsight Compute measures for one kernel: dirty
    lines still in L2 when it ends are written back later, outside its measurement. ``flush_writes=True``
    charges every written byte to the kernel (each write reaches DRAM once eventually).
    """
    hw = get_device(hardware)
    res = {}
    total = L2Result()
    cap = max(1, int(hw.l2_bytes * l2_fraction))
    for name, progs in kernel_trace(kernel, n, d, block_m, block_n, causal, dtype, batch, heads, block_k):
        r = simulate_l2(progs, cap, hw.num_sms * programs_per_sm, flush_writes=flush_writes)
        res[name] = r
        total = total + r
    res["total"] = total
    return res
