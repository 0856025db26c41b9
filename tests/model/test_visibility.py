"""The causal tile-visibility rule (flashsim.model.attention.visibility) against brute force over elements."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from flashsim.model.attention.visibility import (
    block_extent, block_sizes, causal_mask, first_visible_row_block, n_blocks, tile_sums, tile_visible,
    visible_col_blocks, visible_key_rows)


def brute(n, br, bc):
    """tile (i, j) visible iff some (row, col) in it has col <= row."""
    tr, tc = -(-n // br), -(-n // bc)
    vis = np.zeros((tr, tc), bool)
    for i in range(tr):
        for j in range(tc):
            rows = range(i * br, min((i + 1) * br, n))
            cols = range(j * bc, min((j + 1) * bc, n))
            vis[i, j] = any(c <= r for r in rows for c in cols)
    return vis


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 70), br=st.integers(1, 80), bc=st.integers(1, 80))
def test_rule_and_helpers_equal_brute_force(n, br, bc):
    vis = brute(n, br, bc)
    tr, tc = vis.shape
    assert (tr, tc) == (n_blocks(n, br), n_blocks(n, bc))
    i, j = np.meshgrid(np.arange(tr), np.arange(tc), indexing="ij")
    assert np.array_equal(tile_visible(i, j, br, bc, n), vis)
    assert all(tile_visible(a, b, br, bc, n) == vis[a, b] for a in range(tr) for b in range(tc))
    # each row block sees a prefix of column blocks; each column block a suffix of row blocks
    j_vis = visible_col_blocks(np.arange(tr), br, bc, n)
    assert j_vis.tolist() == vis.sum(axis=1).tolist()
    assert all(vis[a, :j_vis[a]].all() for a in range(tr))
    assert [visible_col_blocks(a, br, bc, n) for a in range(tr)] == j_vis.tolist()
    first = [int(np.argmax(vis[:, b])) for b in range(tc)]
    assert [first_visible_row_block(b, br, bc) for b in range(tc)] == first
    assert first_visible_row_block(np.arange(tc), br, bc).tolist() == first
    sizes = block_sizes(n, bc)
    assert [visible_key_rows(a, br, bc, n) for a in range(tr)] == [int(sizes[:j].sum()) for j in j_vis]
    # without a mask everything is visible
    assert visible_col_blocks(0, br, bc, n, causal=False) == tc
    assert tile_visible(tr - 1, tc - 1, br, bc, n, causal=False) is True
    assert first_visible_row_block(tc - 1, br, bc, causal=False) == 0


@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 200), b=st.integers(1, 64))
def test_ragged_blocks(n, b):
    sizes = block_sizes(n, b)
    assert sizes.sum() == n and (sizes[:-1] == b).all() and 1 <= sizes[-1] <= b
    assert [block_extent(t, b, n) for t in range(len(sizes) + 1)] == sizes.tolist() + [0]


@settings(max_examples=100, deadline=None)
@given(r0=st.integers(0, 40), r=st.integers(1, 9), c0=st.integers(0, 40), c=st.integers(1, 9))
def test_causal_mask_is_elementwise_rule(r0, r, c0, c):
    want = np.array([[c0 + y > r0 + x for y in range(c)] for x in range(r)])
    got = causal_mask(r0, r, c0, c)
    if not want.any():
        assert got is None
        got = causal_mask(r0, r, c0, c, always=True)
    assert np.array_equal(got, want)


@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 70), br=st.integers(1, 80), bc=st.integers(1, 80), causal=st.booleans())
def test_tile_sums_equal_brute_force(n, br, bc, causal):
    vis = brute(n, br, bc) if causal else np.ones((n_blocks(n, br), n_blocks(n, bc)), bool)
    rows, cols = block_sizes(n, br), block_sizes(n, bc)
    want = (int((vis * rows[:, None]).sum()), int((vis * cols[None, :]).sum()),
            int((vis * rows[:, None] * cols[None, :]).sum()))
    assert tile_sums(n, br, bc, causal) == want
