"""flashsim.model.kernel_io closed forms and flashsim.model.l2's analytic L2 model."""
import pytest

from flashsim.errors import FlashsimError
from flashsim.model.kernel_io import KERNELS, kernel_dram, kernel_io, kernel_trace
from flashsim.model.l2 import Access, simulate_l2


def test_issue_example():
    assert kernel_io("flash_fwd", 256, 64, 32, 32, False, "fp16").load_bytes == 557_056
    assert kernel_io("flash_fwd", 256, 64, 32, 32, True, "fp16").load_bytes == 327_680


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n,d,bm,bn", [(97, 80, 32, 16), (130, 16, 16, 32), (256, 64, 64, 64), (1025, 128, 128, 64)])
def test_trace_sums_to_closed_form(kernel, causal, n, d, bm, bn):
    io = kernel_io(kernel, n, d, bm, bn, causal, "bf16", batch=2, heads=1)
    trace = kernel_trace(kernel, n, d, bm, bn, causal, "bf16", batch=2, heads=1)
    assert [name for name, _ in trace] == [L.name for L in io.launches]
    for L, (_, progs) in zip(io.launches, trace):
        assert sum(a.nbytes for p in progs for a in p if not a.is_write) == L.load_bytes
        assert sum(a.nbytes for p in progs for a in p if a.is_write) == L.store_bytes


def test_flash_fwd_closed_form_by_hand():
    n, d, es = 512, 64, 2
    io = kernel_io("flash_fwd", n, d, 64, 64, False, "fp16", batch=2, heads=3)
    tm = n // 64
    assert io.load_bytes == 6 * (n * d * es + 2 * tm * n * d * es)
    assert io.store_bytes == 6 * (n * d * es + n * 4)
    naive = kernel_io("naive", n, d, 64, 64, False, "fp32")
    assert naive.launches[0].stores["S"] == n * n * 4 and naive.launches[1].loads["S"] == n * n * 4


def test_bad_arguments():
    with pytest.raises(FlashsimError, match="unknown kernel"):
        kernel_io("flash3", 64, 64, 32, 32)
    with pytest.raises(FlashsimError, match="positive"):
        kernel_io("flash_fwd", 0, 64, 32, 32)
    with pytest.raises(FlashsimError, match="dtype"):
        kernel_io("flash_fwd", 64, 64, 32, 32, dtype="int8")


def test_l2_reuse_within_capacity_hits():
    progs = [[Access(("K", 0), 100), Access(("K", 1), 100)] for _ in range(10)]
    r = simulate_l2(progs, l2_bytes=1000, concurrency=2)
    assert r.requested_read_bytes == 2000 and r.dram_read_bytes == 200
    tiny = simulate_l2(progs, l2_bytes=100, concurrency=1)
    assert tiny.dram_read_bytes == 2000                       # reuse window larger than L2: every re-read misses


def test_l2_writes_reach_dram_once():
    progs = [[Access(("O", i), 64, True), Access(("O", i), 64, True)] for i in range(4)]
    assert simulate_l2(progs, 10_000, 4).dram_write_bytes == 256
    assert simulate_l2(progs, 10_000, 4, flush_writes=False).dram_write_bytes == 0
    assert simulate_l2(progs, 64, 1, flush_writes=False).dram_write_bytes == 192   # evicted ones only



def test_slru_keeps_written_tiles_over_a_stream_read_once():
    """One program writes O, then streams 5 tiles read once through an L2 of 3 tiles: plain LRU evicts the dirty O
    (a DRAM write); the segmented LRU evicts the stream's oldest tiles instead."""
    prog = [[Access("O", 100, True)] + [Access(("S", i), 100) for i in range(5)]]
    lru = simulate_l2(prog, 300, 1, flush_writes=False)
    slru = simulate_l2(prog, 300, 1, flush_writes=False, protected_fraction=0.7)
    assert (lru.dram_read_bytes, lru.dram_write_bytes) == (500, 100)
    assert (slru.dram_read_bytes, slru.dram_write_bytes) == (500, 0)
    assert simulate_l2(prog, 300, 1, protected_fraction=0.7).dram_write_bytes == 100    # flushed at the end


def test_slru_protects_tiles_in_reuse_up_to_its_share():
    """K read twice is protected; a stream read once then passes through without evicting it. With a protected
    share smaller than K, K falls back to probation and the stream evicts it: the third read of K misses."""
    prog = [[Access("K", 100), Access("K", 100)] + [Access(("S", i), 100) for i in range(4)] + [Access("K", 100)]]
    assert simulate_l2(prog, 300, 1, protected_fraction=0.5).dram_read_bytes == 500       # K once, S 4 times
    assert simulate_l2(prog, 300, 1, protected_fraction=0.2).dram_read_bytes == 600       # K again
    assert simulate_l2(prog, 300, 1).dram_read_bytes == 600                               # plain LRU: K again
    with pytest.raises(ValueError, match="protected_fraction"):
        simulate_l2(prog, 300, 1, protected_fraction=1.5)
    with pytest.raises(ValueError, match="> 0"):
        simulate_l2(prog, 300, 1, protected_fraction=0.5, private_cost=0.0)


def test_l2_dirty_end_bytes_are_what_the_flush_adds():
    """Four tiles of 64 bytes written, an L2 of one tile: three evicted during the launch, one dirty at the end.
    dirty_end_bytes is the same with either flag, and written + dirty at the end = written with the flush."""
    progs = [[Access(("O", i), 64, True)] for i in range(4)]
    for protected in (None, 0.6):
        kept = simulate_l2(progs, 64, 1, flush_writes=False, protected_fraction=protected)
        flushed = simulate_l2(progs, 64, 1, flush_writes=True, protected_fraction=protected)
        assert (kept.dram_write_bytes, kept.dirty_end_bytes) == (192, 64)
        assert (flushed.dram_write_bytes, flushed.dirty_end_bytes) == (256, 64)
    total = simulate_l2(progs, 64, 1, flush_writes=False) + simulate_l2(progs, 1000, 1, flush_writes=False)
    assert (total.dram_write_bytes, total.dirty_end_bytes) == (192, 64 + 256)


def test_slru_tile_costs():
    """The segmented LRU with per-tile costs: X read twice by its one program stays in an L2 of 250 bytes at
    cost 1 (K 100 + X 100), not at private_cost 2 (K 100 + X 200); a written tile at write_cost 3 (300) does not
    fit, so it is evicted (written) during the launch."""
    progs = [[Access("K", 100), Access("X", 100), Access("X", 100)], [Access("K", 100)]]
    assert simulate_l2(progs, 250, 1, protected_fraction=0.6).dram_read_bytes == 200
    assert simulate_l2(progs, 250, 1, protected_fraction=0.6, private_cost=2.0).dram_read_bytes == 300
    w = [[Access("O", 100, True)]]
    assert simulate_l2(w, 250, 1, flush_writes=False, protected_fraction=0.6).dram_write_bytes == 0
    assert simulate_l2(w, 250, 1, flush_writes=False, protected_fraction=0.6, write_cost=3.0).dram_write_bytes == 100


def test_kernel_dram_write_back_keeps_the_last_writes():
    """naive softmax, S (32 MiB) read once, P (32 MiB) written: the segmented LRU keeps P's newest tiles dirty in
    the L2 (not counted), plain LRU lets S's reads push them out; H200 Nsight Compute: 6.1-6.5 MiB written (the
    dirty limit that follows the mix leaves 21 MiB dirty here, the H200 25 MiB: one of the fit's largest misses)."""
    mib = 1 << 20
    seg = kernel_dram("naive", 1024, 64, 64, 64, heads=8)["_softmax_kernel"]
    lru = kernel_dram("naive", 1024, 64, 64, 64, heads=8, protected_fraction=None, l2_fraction=0.5,
                      tile_costs=(1.0, 1.0, 1.0))["_softmax_kernel"]
    assert seg.dram_read_bytes == lru.dram_read_bytes == 32 * mib
    assert 4 * mib < seg.dram_write_bytes < 12 * mib < 15 * mib < lru.dram_write_bytes

def test_flash_dram_near_compulsory_when_kv_fits():
    n, d, bh = 4096, 128, 8
    r = kernel_dram("flash_fwd", n, d, 128, 64, False, "fp16", batch=1, heads=bh)["total"]
    assert r.dram_read_bytes == bh * 3 * n * d * 2          # Q, K, V once each
    assert r.dram_write_bytes == 0                          # O and LSE (8.4 MB) stay dirty in L2 when it ends
    assert r.requested_read_bytes > 10 * r.dram_read_bytes
    flushed = kernel_dram("flash_fwd", n, d, 128, 64, False, "fp16", batch=1, heads=bh, flush_writes=True)["total"]
    assert flushed.dram_bytes == bh * (4 * n * d * 2 + n * 4)   # every byte once: Q, K, V read; O, LSE written


def test_flash_dram_grows_when_kv_exceeds_l2():
    from flashsim.model.hardware import get_device
    # 8 heads x 64 Q blocks = 512 programs > 264 resident: the head split across waves re-reads its K/V later
    small = kernel_dram("flash_fwd", 8192, 64, 128, 64, False, "fp16", heads=8, hardware="h200")["total"]
    tiny_l2 = kernel_dram("flash_fwd", 8192, 64, 128, 64, False, "fp16", heads=8,
                          hardware=get_device("h200", l2_bytes=1 << 20))["total"]
    assert tiny_l2.dram_read_bytes > small.dram_read_bytes


def test_l2_shared_cost_doubles_footprint_of_shared_tiles():
    # two programs share tile K (cost 2 x 100) and each streams a private tile of 100 bytes
    progs = [[Access("K", 100), Access(("X", p), 100), Access("K", 100)] for p in range(2)]
    assert simulate_l2(progs, 250, 1).dram_read_bytes == 300                   # K read from DRAM once
    assert simulate_l2(progs, 250, 1, shared_cost=2.0).dram_read_bytes > 300   # K (200) + X (100) overflow


# --- the L1's view: 32-byte sectors per warp instruction --------------------------------------------------------

from flashsim.model.kernel_io import l1_io  # noqa: E402

# Nsight Compute's l1tex global load / store bytes (op_ld + op_ldgsts, op_st) of one launch on the H200, fp16,
# where they differ from the element bytes: rows that start mid-sector (N not a multiple of 16) and the flash
# backward's statistics loaded by every warp holding a copy. (kernel, n, d, bm, bn, causal, batch, heads).
H200_L1 = [
    (("naive", 777, 64, 64, 64, False, 4, 4), "_scores_kernel", 41373696, 47341056),
    (("naive", 777, 64, 64, 64, False, 4, 4), "_softmax_kernel", 47341056, 47341056),
    (("naive", 777, 64, 64, 64, False, 4, 4), "_pv_kernel", 185584896, 1591296),
    (("tiled_matmul", 1000, 80, 64, 64, False, 1, 1), "_matmul_kernel", 5775360, 2512000),
    (("tiled_matmul", 3000, 64, 64, 64, True, 1, 1), "_matmul_kernel", 20742144, 11489664),
    (("tiled_matmul", 5000, 64, 64, 128, False, 1, 1), "_matmul_kernel", 88860672, 62560000),
    (("online_softmax", 1000, 1, 64, 64, False, 1, 1), "_online_softmax_kernel", 5024000, 2516000),
    (("online_softmax", 3000, 1, 64, 64, True, 1, 1), "_online_softmax_kernel", 22979328, 11501664),
    (("online_softmax", 5000, 1, 64, 32, False, 1, 1), "_online_softmax_kernel", 125120000, 62580000),
    (("flash_bwd", 4096, 128, 64, 64, True, 1, 16), "_bwd_dq", 1125122048, 16777216),
    (("flash_bwd", 4096, 80, 64, 64, False, 2, 8), "_bwd_dq", 1364197376, 10485760),
    (("flash_bwd", 8192, 64, 32, 64, True, 1, 8), "_bwd_dq", 2183135232, 8388608),
    (("flash_bwd", 2000, 96, 32, 32, True, 4, 6), "_bwd_dq", 615899136, 9216000),
    (("flash_bwd", 3000, 64, 64, 64, True, 2, 8), "_bwd_dkdv", 324831232, 12288000),
    (("flash_bwd", 12288, 96, 32, 64, False, 1, 2), "_bwd_dq", 3634888704, 4718592),
    # measured after the rules above were chosen; the three marked ones missed and set the rules for tiles of
    # equal shape (tiled_matmul) and for the statistics' MMA layouts (flash backward)
    (("naive", 1000, 64, 64, 64, False, 1, 4), "_pv_kernel", 72192000, 512000),
    (("naive", 777, 64, 32, 32, False, 2, 2), "_scores_kernel", 19891200, 11834880),
    (("naive", 777, 64, 32, 32, False, 2, 2), "_pv_kernel", 21780480, 397824),
    (("naive", 1500, 128, 64, 128, True, 1, 4), "_scores_kernel", 30154752, 40512000),
    (("naive", 1500, 128, 64, 128, True, 1, 4), "_pv_kernel", 100856832, 1536000),
    (("tiled_matmul", 777, 64, 32, 32, False, 1, 1), "_matmul_kernel", 27497600, 1789888),         # missed
    (("tiled_matmul", 2048, 40, 64, 64, False, 1, 1), "_matmul_kernel", 12582912, 8388608),
    (("tiled_matmul", 1500, 96, 128, 64, True, 1, 1), "_matmul_kernel", 6294528, 3353472),
    (("online_softmax", 777, 1, 128, 64, False, 1, 1), "_online_softmax_kernel", 3579776, 1793024),
    (("online_softmax", 1500, 1, 32, 32, True, 1, 1), "_online_softmax_kernel", 6319360, 3165696),
    (("flash_fwd", 777, 64, 64, 64, False, 2, 4), "_flash_fwd_kernel", 21482496, 826112),
    (("flash_bwd", 777, 64, 64, 64, False, 2, 4), "_bwd_preprocess", 1591296, 30464),
    (("flash_bwd", 777, 64, 64, 64, False, 2, 4), "_bwd_dkdv", 24544512, 1591296),                 # missed
    (("flash_bwd", 777, 64, 64, 64, False, 2, 4), "_bwd_dq", 22371776, 795648),                    # missed
    (("flash_bwd", 1000, 128, 64, 64, False, 1, 8), "_bwd_dkdv", 71680000, 4096000),
    (("flash_bwd", 1000, 128, 64, 64, False, 1, 8), "_bwd_dq", 69760000, 2048000),
    # H100 (the chapters' by_launch under Nsight Compute): a 32-row block at d <= 32, where dQ's tile is at least as
    # tall as it is wide, so its MMA warps lie along the rows: the statistics in 2 copies over 4 warps, not 4
    (("flash_bwd", 64, 16, 32, 32, False, 1, 1), "_bwd_dq", 13312, 2048),
    (("flash_bwd", 128, 32, 32, 32, False, 1, 1), "_bwd_dq", 83968, 8192),
]


@pytest.mark.parametrize("cfg,launch,load_bytes,store_bytes", H200_L1)
def test_l1_view_equals_nsight_compute_where_elements_do_not(cfg, launch, load_bytes, store_bytes):
    kernel, n, d, bm, bn, causal, batch, heads = cfg
    io = kernel_io(kernel, n, d, bm, bn, causal, "fp16", batch=batch, heads=heads)
    L = next(L for L in io.launches if L.name == launch)
    assert (L.l1_load_bytes, L.l1_store_bytes) == (load_bytes, store_bytes)
    assert (L.load_bytes, L.store_bytes) != (load_bytes, store_bytes)     # the element bytes do not


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("n,d,bm,bn,causal", [(256, 64, 64, 64, False), (512, 128, 64, 32, True),
                                              (1024, 80, 128, 64, True), (2048, 96, 32, 64, False)])
def test_l1_view_whole_sectors(kernel, n, d, bm, bn, causal):
    """N, d, blocks multiples of 16: the fast path (element bytes, flash backward statistics per warp copy) equals
    the sector count, and the L1 serves the element bytes of every tensor but those statistics."""
    io = kernel_io(kernel, n, d, bm, bn, causal, "fp16", batch=2, heads=3)
    for L, (loads, stores) in zip(io.launches, l1_io(kernel, n, d, bm, bn, causal, "fp16", batch=2, heads=3)):
        assert (L.l1_loads, L.l1_stores) == (loads, stores)
        assert L.l1_stores == L.stores
        assert {t: b for t, b in L.l1_loads.items() if t not in ("LSE", "DELTA")} == \
            {t: b for t, b in L.loads.items() if t not in ("LSE", "DELTA")}
        assert all(L.l1_loads[t] % L.loads[t] == 0 for t in L.loads)


def test_l1_view_partial_sectors_by_hand():
    """online_softmax at N=40, fp16, one 64x64 tile, not vectorized (40 is no multiple of 16): each row's 40
    elements in warp pieces of 32 (64 B) and 8 (16 B). Row r starts at byte 80r: offset 16 in odd rows."""
    L = kernel_io("online_softmax", 40, 1, 64, 64).launches[0]
    even = 2 + 1                          # offset 0: 64 B = 2 sectors, then 16 B at 64 = 1
    odd = 3 + 1                           # offset 16: bytes 16..80 = 3 sectors, then 80..96 = 1
    assert L.l1_stores["P"] == 32 * 20 * (even + odd)
    assert L.l1_loads["X"] == 2 * L.l1_stores["P"]
    assert L.l1_stores["LSE"] == 5 * 32                            # 160 B from byte 0: 5 sectors
    assert L.stores["P"] == 40 * 40 * 2


def test_l2_dirty_limit_writes_back_the_oldest_and_keeps_them():
    """At most 150 bytes dirty: the third write of 100 writes back the first (kept, clean), whose re-read then
    hits; with no limit nothing is written during the launch."""
    progs = [[Access("A", 100, True), Access("B", 100, True), Access("C", 100, True), Access("A", 100)]]
    for fraction in (None, 0.6):
        r = simulate_l2(progs, 1000, 1, flush_writes=False, protected_fraction=fraction, dirty_limit=150)
        assert (r.dram_write_bytes, r.dirty_end_bytes, r.dram_read_bytes) == (200, 100, 0), fraction
        free = simulate_l2(progs, 1000, 1, flush_writes=False, protected_fraction=fraction)
        assert (free.dram_write_bytes, free.dirty_end_bytes) == (0, 300)


def test_online_softmax_has_every_program_resident():
    """N=5120 at 32x64: 160 programs, all resident (2 per SM), so pass 2 re-reads after the whole matrix's first
    pass and misses (H200, write-back measurement: 99.97 MiB of 100); at 1 per SM the first 132 rows hit some."""
    from flashsim.model.kernel_io import launch_programs_per_sm
    assert launch_programs_per_sm("_online_softmax_kernel") == 2 and launch_programs_per_sm("_flash_fwd_kernel") == 1
    mib = 1 << 20
    two = kernel_dram("online_softmax", 5120, 1, 32, 64)["total"].dram_read_bytes
    one = kernel_dram("online_softmax", 5120, 1, 32, 64, programs_per_sm=1)["total"].dram_read_bytes
    assert two == 100 * mib > one + 4 * mib



def test_l2_dirty_limit_follows_the_write_share_of_fills():
    """With ``dirty_mix`` the limit scales with the write share of recent fills: a stream of writes alone keeps
    the whole limit dirty; the same writes interleaved with two reads each from DRAM (share 1/3) keep
    min(1, 0.1 + 1.4/3) = 0.57 of it (the share, averaged over the last capacity's worth of fills, settles there)."""
    writes = [[Access(("P", i), 10, True) for i in range(3000)]]
    mixed = [[a for i in range(3000) for a in (Access(("S", 2 * i), 10), Access(("S", 2 * i + 1), 10),
                                                Access(("P", i), 10, True))]]
    kw = dict(l2_bytes=10_000, concurrency=1, flush_writes=False, protected_fraction=0.6, dirty_limit=1000)
    assert simulate_l2(writes, **kw).dirty_end_bytes == 1000
    assert simulate_l2(writes, **kw, dirty_mix=(0.1, 1.4)).dirty_end_bytes == 1000
    assert simulate_l2(mixed, **kw).dirty_end_bytes == 1000
    kept = simulate_l2(mixed, **kw, dirty_mix=(0.1, 1.4)).dirty_end_bytes
    assert 500 <= kept <= 600
    assert simulate_l2(mixed, **{**kw, "flush_writes": True}, dirty_mix=(0.1, 1.4)).dram_write_bytes == 30_000
    with pytest.raises(ValueError, match="dirty_mix"):
        simulate_l2(writes, 1000, 1, dirty_mix=(0.1,))
