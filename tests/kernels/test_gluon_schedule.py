"""The host side of the Gluon forward's balanced tile lists (flashsim.kernels.gluon.balanced_tile_lists): plain
numpy, so it is tested here on any machine (the kernel that walks the lists is GPU-only: tests/kernels/test_gluon.py)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from flashsim.kernels import gluon as G


@settings(deadline=None, max_examples=60)
@given(costs=st.lists(st.integers(1, 50), min_size=1, max_size=300), ctas=st.integers(1, 140),
       method=st.sampled_from(G.BALANCE_METHODS), section=st.integers(1, 80))
def test_every_tile_once_every_cta_some_and_list_order_kept(costs, ctas, method, section):
    ctas = min(ctas, len(costs))
    order, start = G.balanced_tile_lists(costs, ctas, method, section_tiles=section)
    assert order.dtype == start.dtype == np.int32 and len(start) == ctas + 1 and start[0] == 0
    assert sorted(order.tolist()) == list(range(len(costs)))                 # each tile exactly once
    for p in range(ctas):
        mine = order[start[p]:start[p + 1]]
        assert len(mine) >= 1 and np.all(np.diff(mine) > 0)                   # at least one, in list order
    loads = [sum(costs[i] for i in order[start[p]:start[p + 1]]) for p in range(ctas)]
    # no CTA ends more than one tile after the mean (both rules hand each tile to the least-loaded CTA)
    assert max(loads) <= sum(costs) / ctas + max(costs) + 1e-9


def test_lpt_beats_the_fixed_stride_on_causal_tiles():
    """The causal forward's tiles (d=128, N=16384, 16 heads, 128-row tiles): the fixed stride leaves the busiest CTA
    with 1.29x the mean work under this cost, the balanced lists within 1 %."""
    N, BH, cta_m = 16384, 16, 128
    sec = max(1, min(BH, G.L2_SECTION_BYTES // (2 * N * 128 * 2)))
    costs = G.fwd_tile_kv_tiles(N, BH, N // cta_m, sec, True, cta_m, 128) + G.TILE_OVERHEAD_KV_TILES
    mean = costs.sum() / 132
    stride = max(costs[p::132].sum() for p in range(132)) / mean
    order, start = G.balanced_tile_lists(costs, 132, "lpt")
    lpt = max(costs[order[start[p]:start[p + 1]]].sum() for p in range(132)) / mean
    assert stride > 1.25 and lpt < 1.01


@settings(deadline=None, max_examples=40)
@given(costs=st.lists(st.integers(1, 50), min_size=2, max_size=300), ctas=st.integers(1, 140),
       section=st.integers(1, 80))
def test_section_lpt_deals_each_section_before_the_next(costs, ctas, section):
    """Every CTA's tiles of section s come before its tiles of section s + 1 (list order), and after each section
    the CTAs' loads differ by at most the longest tile: no CTA runs ahead into the next section's heads while
    another is a tile or more behind."""
    ctas = min(ctas, len(costs))
    costs = np.asarray(costs, dtype=float)
    order, start = G.balanced_tile_lists(costs, ctas, "section_lpt", section_tiles=section)
    owner = np.empty(len(costs), dtype=int)
    for p in range(ctas):
        owner[order[start[p]:start[p + 1]]] = p
    for s0 in range(0, len(costs), section):
        loads = np.bincount(owner[:s0 + section], weights=costs[:s0 + section], minlength=ctas)
        if s0 + section >= ctas:          # every CTA has a tile by now
            assert loads.max() - loads.min() <= costs.max() + 1e-9


def test_section_lpt_keeps_the_l2_working_set_of_the_causal_d64_forward():
    """The causal d=64 forward at N=4096 (B=4, H=32, 128-row tiles, sections of 20 heads): replayed with the tiles'
    costs, "lpt" has about 42 heads' K and V in use at a time on 132 CTAs (42 MB, near the H200's L2), while
    "section_lpt" has about 20 (one section), at the same balance."""
    N, BH, d, cta_m = 4096, 128, 64, 128
    n_mblk = N // cta_m
    sec = max(1, min(BH, G.L2_SECTION_BYTES // (2 * N * d * 2)))
    costs = G.fwd_tile_kv_tiles(N, BH, n_mblk, sec, True, cta_m, 128) + G.TILE_OVERHEAD_KV_TILES
    bh, _ = G.fwd_tile_list(BH, n_mblk, sec)

    def replay(method):
        order, start = G.balanced_tile_lists(costs, 132, method, section_tiles=sec * n_mblk)
        spans = []
        for p in range(132):
            ends = np.cumsum(costs[order[start[p]:start[p + 1]]])
            spans += zip(ends - costs[order[start[p]:start[p + 1]]], ends, bh[order[start[p]:start[p + 1]]])
        end = max(e for _, e, _ in spans)
        heads = [len({h for a, e, h in spans if a <= t < e}) for t in np.linspace(0, end, 100)[1:-1]]
        return np.mean(heads), end

    lpt_heads, lpt_end = replay("lpt")
    sec_heads, sec_end = replay("section_lpt")
    assert lpt_heads > 35 and sec_heads < 24 and sec_end <= lpt_end * 1.01


def test_tile_costs_follow_the_kernels_order():
    """Query blocks from the last to the first within each L2 section, heads inner; causal: block m reads
    (m + 1) * CTA_M / BLOCK_N K/V tiles (rounded up, at most N's), non-causal all of them."""
    kv = G.fwd_tile_kv_tiles(N=1000, BH=3, n_mblk=8, sec=2, causal=True, cta_m=128, block_n=128)
    assert kv.tolist()[:4] == [8, 8, 7, 7] and kv.tolist()[14:16] == [1, 1] and kv.tolist()[16:] == list(range(8, 0, -1))
    assert set(G.fwd_tile_kv_tiles(1000, 3, 8, 2, False, 128, 128).tolist()) == {8}


def test_bad_arguments_say_what_is_wrong():
    with pytest.raises(ValueError, match="3 CTAs for 2 tiles"):
        G.balanced_tile_lists([1, 2], 3)
    with pytest.raises(ValueError, match="method 'fifo'"):
        G.balanced_tile_lists([1, 2], 1, "fifo")
    with pytest.raises(ValueError, match="needs section_tiles"):
        G.balanced_tile_lists([1, 2], 1, "section_lpt")
