"""Online softmax (chapter 04) and its demo bugs (chapter 11)."""
import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flashsim.model.attention.online_softmax import (
    LN2, LOG2E, WORKED_EXAMPLE_BLOCKS, merge, one_shot_softmax_stats, online_attention_row, online_softmax,
    online_softmax_blocks, worked_example)
from flashsim.errors import FlashsimError


def test_worked_example_seed_numbers():
    first, second = worked_example()
    # l is relative to the running max, base e: e^(1-3) + e^(3-3), then 1.135·e^(3-5) + e^(2-5) + e^(5-5)
    assert (first.m, round(first.l, 3)) == (3.0, 1.135)
    assert (second.m, round(second.l, 3)) == (5.0, 1.203)
    assert first.l == pytest.approx(math.exp(-2) + 1, rel=1e-15)
    assert second.l == pytest.approx((math.exp(-2) + 1) * math.exp(-2) + math.exp(-3) + 1, rel=1e-15)
    one_shot = one_shot_softmax_stats([s for blk in WORKED_EXAMPLE_BLOCKS for s in blk])
    assert (one_shot.m, one_shot.l) == (5.0, pytest.approx(second.l, rel=1e-14))


def test_log2e_and_ln2_are_written_once():
    """LOG2E and LN2 are log2(e) and ln 2, and their digits appear only where they are defined: the kernels, the
    chapter-12 template, the checkers and the experiments import them."""
    assert (LOG2E, LN2) == (1 / math.log(2), math.log(2))
    root = Path(__file__).parents[2]
    digits = re.compile(r"1\.44269|0\.69314")
    sources = [p for d in ("flashsim", "benchmarks", "tools") for p in (root / d).rglob("*.py")]
    written = sorted(str(p.relative_to(root)) for p in sources if digits.search(p.read_text(encoding="utf-8")))
    assert written == ["flashsim/model/attention/online_softmax.py"]


def test_merge_of_the_two_blocks_gives_the_same_denominator():
    a = one_shot_softmax_stats([1, 3])
    b = one_shot_softmax_stats([2, 5])
    assert merge(a, b).l == pytest.approx(worked_example()[-1].l, rel=1e-14)
    assert merge(b, a) == merge(a, b)
    assert merge(a, (-math.inf, 0.0)) == a


finite = st.floats(-50, 50, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(st.lists(finite, min_size=1, max_size=40), st.integers(1, 12))
def test_online_equals_one_shot_any_block(x, block):
    last = list(online_softmax_blocks(x, block))[-1]
    ref = one_shot_softmax_stats(x)
    assert last.m == ref.m
    assert last.l == pytest.approx(ref.l, rel=1e-12)
    p = online_softmax(x, block)
    assert p.sum() == pytest.approx(1.0, rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(finite, min_size=1, max_size=5), min_size=3, max_size=3))
def test_merge_is_associative_and_commutative(parts):
    a, b, c = (one_shot_softmax_stats(p) for p in parts)
    left, right = merge(merge(a, b), c), merge(a, merge(b, c))
    assert left.m == right.m and left.l == pytest.approx(right.l, rel=1e-12)
    assert merge(a, b).l == pytest.approx(merge(b, a).l, rel=1e-15)
    whole = one_shot_softmax_stats([s for p in parts for s in p])
    assert left.l == pytest.approx(whole.l, rel=1e-12)


def test_no_max_subtraction_overflows_fp16_and_max_subtraction_does_not():
    x = [1.0, 3.0, 12.0, 5.0]  # e^12 = 162755 > 65504, fp16's largest finite number
    naive = list(online_softmax_blocks(x, 2, subtract_max=False, dtype="fp16"))
    assert math.isfinite(naive[0].l) and naive[-1].l == math.inf
    safe = list(online_softmax_blocks(x, 2, dtype="fp16"))[-1]
    assert safe.l == pytest.approx(one_shot_softmax_stats(x).l, rel=2e-3)
    # in float64 the naive sum is fine (it is the same number times e^m)
    naive64 = list(online_softmax_blocks(x, 2, subtract_max=False))[-1]
    assert naive64.l == pytest.approx(one_shot_softmax_stats(x).l * math.exp(12.0), rel=1e-12)


def test_missing_rescale_bug_shows_only_when_the_max_grows():
    grows = [1.0, 3.0, 2.0, 5.0]
    buggy = list(online_softmax_blocks(grows, 2, rescale=False))[-1]
    # the old l (1.135, relative to m=3) is added unscaled: 1.135 + e^-3 + 1
    assert buggy.l == pytest.approx(math.exp(-2) + 1 + math.exp(-3) + 1, rel=1e-12)
    assert buggy.l != pytest.approx(one_shot_softmax_stats(grows).l, rel=1e-3)
    first_is_max = [5.0, 3.0, 2.0, 1.0]
    ok = list(online_softmax_blocks(first_is_max, 2, rescale=False))[-1]
    assert ok.l == pytest.approx(one_shot_softmax_stats(first_is_max).l, rel=1e-12)


def test_online_attention_row_matches_softmax_times_v_and_bug_breaks_it():
    rng = np.random.default_rng(0)
    s = rng.standard_normal(13) * 3
    v = rng.standard_normal((13, 4))
    p = np.exp(s - s.max())
    ref = p @ v / p.sum()
    m, l, o = list(online_attention_row(s, v, block=4))[-1]
    np.testing.assert_allclose(o, ref, rtol=1e-12)
    s_up = np.arange(13.0)  # the max grows in every block
    _, _, bad = list(online_attention_row(s_up, v, block=4, rescale=False))[-1]
    p_up = np.exp(s_up - s_up.max())
    assert not np.allclose(bad, p_up @ v / p_up.sum(), rtol=1e-3)


@pytest.mark.parametrize("block", [0, -3])
def test_bad_block_is_a_clear_error(block):
    with pytest.raises(FlashsimError, match="block"):
        list(online_softmax_blocks([1.0], block))
    with pytest.raises(FlashsimError, match="block"):
        list(online_attention_row([1.0], np.ones((1, 2)), block))


# --- the tile update and the merge of normalised partials (the one definition every tiled algorithm calls) ---

from flashsim.model.attention.online_softmax import combine_partials, merge_partials, online_softmax_update  # noqa: E402


def _partial(s, v):
    """(o, lse) of one block of scores s (n, c) against values v (c, d), float64."""
    m = s.max(axis=1)
    e = np.exp(s - m[:, None])
    return e @ v / e.sum(axis=1)[:, None], m + np.log(e.sum(axis=1))


@settings(max_examples=50, deadline=None)
@given(n=st.integers(1, 6), d=st.integers(1, 5), cuts=st.lists(st.integers(1, 7), min_size=1, max_size=5),
       seed=st.integers(0, 2**16))
def test_update_over_tiles_equals_one_shot_softmax_times_v(n, d, cuts, seed):
    rng = np.random.default_rng(seed)
    s = rng.standard_normal((n, sum(cuts))) * 4
    v = rng.standard_normal((sum(cuts), d))
    m, l, acc = np.full(n, -np.inf), np.zeros(n), np.zeros((n, d))
    start = 0
    with np.errstate(invalid="ignore"):
        for c in cuts:
            m, l, acc = online_softmax_update(m, l, acc, s[:, start:start + c], v[start:start + c])
            start += c
    o, lse = _partial(s, v)
    np.testing.assert_allclose(acc / l[:, None], o, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(m + np.log(l), lse, rtol=1e-13, atol=1e-13)


def test_update_keeps_float32_and_rescale_false_is_the_bug():
    s = np.array([[0.0, 1.0], [5.0, 9.0]], np.float32)
    v = np.eye(2, dtype=np.float32)
    m, l, acc = np.full(2, -np.inf, np.float32), np.zeros(2, np.float32), np.zeros((2, 2), np.float32)
    m, l, acc = online_softmax_update(m, l, acc, s[:, :1], v[:1])
    m, l, acc = online_softmax_update(m, l, acc, s[:, 1:], v[1:])
    assert acc.dtype == l.dtype == m.dtype == np.float32
    m2, l2, _ = online_softmax_update(np.zeros(2, np.float32), np.ones(2, np.float32), np.zeros((2, 2), np.float32),
                                      s, v, rescale=False)
    assert (l2 > 1 + np.exp(s - s.max(1, keepdims=True)).sum(1) - 1e-6).all()


@settings(max_examples=50, deadline=None)
@given(n=st.integers(1, 5), d=st.integers(1, 4), parts=st.integers(2, 5), seed=st.integers(0, 2**16))
def test_merge_is_associative_commutative_and_exact(n, d, parts, seed):
    rng = np.random.default_rng(seed)
    blocks = [(rng.standard_normal((n, 3)) * 3, rng.standard_normal((3, d))) for _ in range(parts)]
    ps = [_partial(s, v) for s, v in blocks]
    want = _partial(np.concatenate([s for s, _ in blocks], 1), np.concatenate([v for _, v in blocks], 0))
    o, lse = combine_partials(np.stack([p[0] for p in ps]), np.stack([p[1] for p in ps]))
    np.testing.assert_allclose(o, want[0], rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(lse, want[1], rtol=1e-13)
    a, b, c = ps[0], ps[1], ps[-1]
    left = merge_partials(*merge_partials(*a, *b), *c)
    right = merge_partials(*a, *merge_partials(*b, *c))
    for x, y in zip(left, right):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-13)
    for x, y in zip(merge_partials(*a, *b), merge_partials(*b, *a)):
        np.testing.assert_allclose(x, y, rtol=1e-14, atol=1e-15)


def test_merge_with_an_empty_part_is_the_identity():
    o = np.array([[1.0, 2.0]])
    lse = np.array([0.5])
    mo, ml = merge_partials(o, lse, np.full((1, 2), np.nan), np.array([-np.inf]))
    assert np.array_equal(mo, o) and np.array_equal(ml, lse)
