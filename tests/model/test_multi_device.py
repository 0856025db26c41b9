"""The multi-device simulator (chapter 13): link bytes equal the closed forms, the ring is exact, the overlap
condition is where compute and transfer times cross, flash-decoding's bytes and time model."""
import math

import numpy as np
import pytest

from flashsim.model.multi import cluster as md
from flashsim.errors import FlashsimError
from flashsim.model.multi import closed_forms as cf


@pytest.mark.parametrize("world", [1, 2, 3, 4, 8])
@pytest.mark.parametrize("causal", [False, True])
def test_ring_link_bytes_equal_the_closed_form(world, causal):
    n, d, heads, batch = 32 * world, 16, 3, 2
    r = md.ring_attention(n, d, world, heads=heads, batch=batch, dtype="fp16", causal=causal)
    assert r.link_bytes == cf.ring_link_bytes(n, d, world, heads, batch, "fp16", causal)
    assert r.link_messages == cf.ring_messages_per_device(world, causal) if world > 1 else r.link_messages == [0]
    assert r.total_link_bytes == cf.ring_total_link_bytes(n, d, world, heads, batch, "fp16", causal)
    msg = 2 * batch * heads * (n // world) * d * 2
    total = world * (world - 1) * msg
    assert r.total_link_bytes == (total // 2 if causal else total)
    # every query shard has seen every key block (computed or skipped as fully masked)
    assert r.steps[-1].done.all() and len(r.steps) == world
    # a send reads the block from the sender's HBM and writes it into the receiver's
    for dev in range(world):
        assert r.device_counters[dev].read_bytes_by_tensor.get("KV", 0) == r.link_bytes[dev]
        assert r.device_counters[dev].write_bytes_by_tensor.get("KV", 0) == r.link_bytes[dev - 1] if world > 1 \
            else True


@pytest.mark.parametrize("causal", [False, True])
def test_ring_is_exact(causal):
    r = md.ring_attention(96, 8, world=3, heads=2, causal=causal, numbers=True)
    assert r.max_abs_err < 1e-12
    if causal:   # block j > r is skipped: device r computes r + 1 blocks
        assert [sum(s.work[d] != "skip" for s in r.steps) for d in range(3)] == [1, 2, 3]


def test_ring_time_overlap_vs_serial():
    kw = dict(n=32768 * 4, d=128, world=4, heads=16, dtype="fp16", device="h200")
    fast = md.ring_attention(link="nvlink4", **kw)
    slow = md.ring_attention(link="pcie5", **kw)
    serial = md.ring_attention(link="nvlink4", overlap=False, **kw)
    assert fast.time_s == pytest.approx(slow.time_s)           # 32768 rows per device > 15.7k (PCIe threshold)
    assert serial.time_s > fast.time_s
    small = dict(kw, n=512 * 4)                                  # 512 rows: the transfer shows on PCIe
    assert md.ring_attention(link="pcie5", **small).time_s > md.ring_attention(link="nvlink4", **small).time_s


def test_overlap_threshold_is_where_compute_meets_transfer():
    for link in md.LINK_PRESETS:
        n0 = md.overlap_threshold("h200", link, "fp16")
        c, m = md.ring_step_times(n0, 128, heads=8, dtype="fp16", device="h200", link=link)
        assert c == pytest.approx(m, rel=1e-3)      # n0 is rounded down to whole rows
        c2, m2 = md.ring_step_times(2 * n0, 128, heads=8, device="h200", link=link)
        assert c2 > m2
    assert round(md.overlap_threshold("h200", "nvlink4")) == 2198          # = F/W rows for 2-byte elements
    assert md.overlap_threshold("h200", "nvlink4", "fp32") == pytest.approx(2 * md.overlap_threshold())


def test_link_presets_cite_sources_and_validate():
    for spec in md.LINK_PRESETS.values():
        assert spec.source and spec.bandwidth_bytes_per_s > 0
    assert md.get_link("nvlink").bandwidth_bytes_per_s == 450e9
    assert md.get_link("ib").bandwidth_bytes_per_s == 50e9
    assert md.get_link("pcie5", bandwidth_bytes_per_s=1e9).bandwidth_bytes_per_s == 1e9
    with pytest.raises(FlashsimError, match="unknown link"):
        md.get_link("carrier pigeon")
    with pytest.raises(FlashsimError, match="multiple"):
        md.ring_attention(100, 8, world=3)
    with pytest.raises(FlashsimError, match="no link"):
        md.Cluster(4).send(0, 2, 10)


@pytest.mark.parametrize("n, heads, splits", [(65536, 16, 17), (65536, 1, 264), (1000, 2, 3), (64, 1, 8)])
def test_flash_decoding_bytes_equal_the_closed_form(n, heads, splits):
    from flashsim.kernels.split_kv import split_plan
    r = md.flash_decoding(n, 128, heads, splits=splits)
    eff = split_plan(n, splits, 64)[1]
    assert r.splits == eff and r.programs == eff * heads
    want = cf.split_kv_bytes(n, 128, eff, heads=heads)
    for kernel, c in r.counters.items():
        assert dict(c.read_bytes_by_tensor) == want[kernel]["loads"]
        assert dict(c.write_bytes_by_tensor) == want[kernel]["stores"]
    assert r.hbm_bytes == cf.split_kv_total_bytes(n, 128, eff, heads=heads)


def test_flash_decoding_time_model_follows_the_sms():
    one = md.flash_decoding(65536, 128, 16, splits=1)
    split = md.flash_decoding(65536, 128, 16, splits=17)
    assert one.sm_busy_fraction == pytest.approx(16 / 132) and split.waves == 3
    # one program streams at HBM bandwidth / SMs (measured on the H200: ~36 GB/s): 33.5 MB in ~0.92 ms
    assert one.time_s == pytest.approx(2 * 65536 * 128 * 2 / (4.8e12 / 132), rel=1e-3)
    assert 4 < one.time_s / split.time_s < 7                      # measured on the H200: 5.65


def test_numpy_split_and_combine_are_exact():
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((2, 8)), rng.standard_normal((50, 8)), rng.standard_normal((50, 8))
    o, lse = md.combine_partials(*md.split_partials(q, k, v, 4))
    ref, ref_lse = md.block_attention_numpy(q, k, v, 8 ** -0.5)
    assert np.abs(o - ref).max() < 1e-12 and np.abs(lse - ref_lse).max() < 1e-12
    assert math.isclose(cf.overlap_min_block(989e12, 450e9), 2197.77, rel_tol=1e-5)
