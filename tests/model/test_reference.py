"""The one reference attention (flashsim.model.attention.reference) against a naive float64 formula."""
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flashsim.errors import FlashsimError
from flashsim.model.attention.reference import (
    plain_attention, reference_attention, reference_attention_grads, reference_forward_backward, softmax_scale)
from flashsim.model.dtypes import round_to


def naive(q, k, v, causal, scale):
    """Row by row with Python floats: the textbook formula, nothing shared with the reference."""
    nq, nk = q.shape[0], k.shape[0]
    o, lse = np.zeros((nq, v.shape[1])), np.zeros(nq)
    for r in range(nq):
        cols = [c for c in range(nk) if not causal or c <= r]
        s = [scale * float(np.dot(q[r], k[c])) for c in cols]
        m = max(s)
        den = sum(math.exp(x - m) for x in s)
        lse[r] = m + math.log(den)
        for x, c in zip(s, cols):
            o[r] += math.exp(x - m) / den * v[c]
    return o, lse


@pytest.mark.parametrize("n, d, causal", [(97, 13, False), (97, 13, True), (1025, 3, True), (5, 1, False)])
def test_reference_matches_naive_formula_on_odd_sizes(n, d, causal):
    rng = np.random.default_rng(n)
    q, k, v = (rng.standard_normal((n, d)) for _ in range(3))
    o, lse = reference_attention(q, k, v, causal, return_lse=True, row_chunk=17)
    want_o, want_lse = naive(q, k, v, causal, 1 / math.sqrt(d))
    np.testing.assert_allclose(o, want_o, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-13, atol=1e-13)


def test_batched_sm_scale_and_rectangular():
    rng = np.random.default_rng(1)
    q = rng.standard_normal((2, 3, 7, 5))   # (B, H, Nq, d)
    k = rng.standard_normal((2, 3, 11, 5))  # (B, H, Nk, d)
    v = rng.standard_normal((2, 3, 11, 4))
    o, lse = reference_attention(q, k, v, True, sm_scale=0.3, return_lse=True)
    assert o.shape == (2, 3, 7, 4) and lse.shape == (2, 3, 7) and o.dtype == np.float64
    for b in range(2):
        for h in range(3):
            want_o, want_lse = naive(q[b, h], k[b, h], v[b, h], True, 0.3)
            np.testing.assert_allclose(o[b, h], want_o, rtol=1e-12, atol=1e-13)
            np.testing.assert_allclose(lse[b, h], want_lse, rtol=1e-13)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 40), d=st.integers(1, 9), causal=st.booleans(), chunk=st.integers(1, 41),
       seed=st.integers(0, 2**16))
def test_chunking_changes_nothing_and_grads_match_finite_differences(n, d, causal, chunk, seed):
    rng = np.random.default_rng(seed)
    q, k, v, do = (rng.standard_normal((n, d)) for _ in range(4))
    o1, g1 = reference_forward_backward(q, k, v, do, causal, row_chunk=chunk)
    o2, g2 = reference_forward_backward(q, k, v, do, causal, row_chunk=n)
    np.testing.assert_allclose(o1, o2, rtol=1e-12, atol=1e-14)
    for a, b in zip(g1, g2):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    for a, b in zip(g1, reference_attention_grads(q, k, v, do, causal)):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    # dq by central differences on one entry
    eps, (r, c) = 1e-6, (n // 2, d // 2)
    qp, qm = q.copy(), q.copy()
    qp[r, c] += eps
    qm[r, c] -= eps
    fd = ((reference_attention(qp, k, v, causal) - reference_attention(qm, k, v, causal)) * do).sum() / (2 * eps)
    assert g1[0][r, c] == pytest.approx(fd, rel=1e-5, abs=1e-7)


def test_plain_is_close_to_reference_and_rounds():
    rng = np.random.default_rng(3)
    q, k, v = (round_to(rng.standard_normal((33, 8)).astype(np.float32), "fp16") for _ in range(3))
    exact = reference_attention(q, k, v, True)
    plain, grads = plain_attention(q, k, v, causal=True, dtype="fp16")
    assert grads is None and plain.dtype == np.float32
    assert np.array_equal(plain, round_to(plain, "fp16"))
    assert 0 < np.abs(plain - exact).max() < 1e-2


def test_softmax_scale_and_bad_shapes():
    assert softmax_scale(64) == 0.125
    with pytest.raises(FlashsimError, match="leading"):
        reference_attention(np.ones((2, 4, 3)), np.ones((3, 4, 3)), np.ones((3, 4, 3)))
    with pytest.raises(FlashsimError, match="rank"):
        reference_attention(np.ones(3), np.ones(3), np.ones(3))
