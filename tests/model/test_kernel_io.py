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
