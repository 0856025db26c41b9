"""The host side of the Gluon forward's balanced tile lists (flashsim.kernels.gluon.balanced_tile_lists): plain
numpy, so it is tested here on any machine (the kernel that walks the lists is GPU-only: tests/kernels/test_gluon.py)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from flashsim.kernels import gluon as G


@settings(deadline=None, max_examples=60)
@given(costs=st.lists(st.integers(1, 50), min_size=1, max_size=300), ctas=st.integers(1, 140),
       method=st.sampled_from(["list", "lpt"]))
def test_every_tile_once_every_cta_some_and_list_order_kept(costs, ctas, method):
    ctas = min(ctas, len(costs))
    order, start = G.balanced_tile_lists(costs, ctas, method)
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
