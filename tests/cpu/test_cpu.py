"""flashsim.cpu (chapter 10): the numba FlashAttention kernel is right, O(N) in memory, and rejects bad input."""
import tracemalloc

import numpy as np
import pytest

from flashsim.cpu import (
    default_blocks,
    effective_blocks,
    flash_attention_cpu,
    flash_extra_bytes,
    naive_attention_numpy,
    naive_extra_bytes,
)
from flashsim.errors import FlashsimError
from flashsim.model.attention.reference import reference_attention
from flashsim.model.hardware import get_device


def reference(q, k, v, causal=False, sm_scale=None):
    """(o, lse) of the one float64 reference, flashsim.model.attention.reference: the ground truth."""
    return reference_attention(q, k, v, causal, sm_scale=sm_scale, return_lse=True)


def qkv(shape, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(shape) * scale).astype(np.float32) for _ in range(3)]


@pytest.mark.parametrize("n,d", [(1, 64), (16, 16), (97, 64), (1025, 80), (200, 17), (130, 128)])
@pytest.mark.parametrize("causal", [False, True])
def test_matches_float64_reference(n, d, causal):
    q, k, v = qkv((n, d), seed=n + d)
    out, lse = flash_attention_cpu(q, k, v, causal=causal, return_lse=True)
    want, want_lse = reference(q, k, v, causal)
    assert out.dtype == np.float32 and out.shape == (n, d)
    assert lse.dtype == np.float32 and lse.shape == (n,)
    np.testing.assert_allclose(out, want, atol=2e-5, rtol=1e-4)
    np.testing.assert_allclose(lse, want_lse, atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("block_r,block_c", [(4, 16), (24, 48), (7, 20), (64, 32), (100, 300), (512, 512)])
@pytest.mark.parametrize("causal", [False, True])
def test_ragged_blocks(block_r, block_c, causal):
    """N = 97 is a multiple of no block size; block sizes off the 4 x 16 tile are rounded up."""
    q, k, v = qkv((97, 64), seed=block_r * block_c)
    out = flash_attention_cpu(q, k, v, causal=causal, block_r=block_r, block_c=block_c)
    np.testing.assert_allclose(out, reference(q, k, v, causal)[0], atol=2e-5, rtol=1e-4)


def test_batched_heads_and_scale():
    q, k, v = qkv((2, 3, 97, 32), seed=3)
    for causal in (False, True):
        out, lse = flash_attention_cpu(q, k, v, causal=causal, sm_scale=0.3, block_r=32, block_c=32,
                                       return_lse=True)
        want, want_lse = reference(q, k, v, causal, sm_scale=0.3)
        assert out.shape == q.shape and lse.shape == (2, 3, 97)
        np.testing.assert_allclose(out, want, atol=2e-5, rtol=1e-4)
        np.testing.assert_allclose(lse, want_lse, atol=2e-5, rtol=1e-5)


def test_large_scores_do_not_overflow():
    """Scores far beyond exp's float32 range: the running max keeps every exponent <= 0."""
    q, k, v = qkv((300, 64), seed=7, scale=30.0)
    out = flash_attention_cpu(q, k, v, causal=True, block_r=32, block_c=64)
    assert np.isfinite(out).all()
    want = reference(q, k, v, True)[0]
    # scores ~1e3 carry float32 rounding of ~1e-4 each, so compare with standard attention in float32
    err_naive = np.abs(naive_attention_numpy(q, k, v, causal=True) - want).max()
    assert np.abs(out - want).max() <= 2 * err_naive + 1e-4


def test_non_contiguous_input():
    q, k, v = qkv((2, 120, 64), seed=5)
    qt, kt, vt = (x.transpose(1, 0, 2)[None] for x in (q, k, v))  # (1, 120, 2, 64) -> view, not contiguous
    qs, ks, vs = (np.swapaxes(x, 1, 2) for x in (qt, kt, vt))  # (1, 2, 120, 64), strided
    out = flash_attention_cpu(qs, ks, vs)
    np.testing.assert_allclose(out, reference(qs, ks, vs)[0], atol=2e-5, rtol=1e-4)


def test_naive_numpy_matches_reference():
    q, k, v = qkv((97, 64), seed=11)
    for causal in (False, True):
        out, lse = naive_attention_numpy(q, k, v, causal=causal, return_lse=True)
        want, want_lse = reference(q, k, v, causal)
        np.testing.assert_allclose(out, want, atol=2e-5, rtol=1e-4)
        np.testing.assert_allclose(lse, want_lse, atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("causal", [False, True])
def test_error_comparable_to_torch_float32(causal):
    """Against float64, our float32 error is at most 2x torch's float32 SDPA error (plus a float32 ulp)."""
    torch = pytest.importorskip("torch")
    q, k, v = qkv((1, 2, 1025, 64), seed=13)
    want = reference(q, k, v, causal)[0]
    ours = flash_attention_cpu(q, k, v, causal=causal)
    theirs = torch.nn.functional.scaled_dot_product_attention(
        *(torch.from_numpy(x) for x in (q, k, v)), is_causal=causal).numpy()
    err_ours = np.abs(ours - want).max()
    err_torch = np.abs(theirs - want).max()
    assert err_ours <= 2 * err_torch + 1e-6, (err_ours, err_torch)


def test_default_blocks_fit_the_cache():
    hw = get_device("cpu")
    for d in (16, 64, 80, 128, 256):
        br, bc = default_blocks(d, hw)
        assert br == 64 and bc % 64 == 0 and 64 <= bc <= 1024
        dp = -(-d // 16) * 16
        assert 4 * (2 * br * dp + 2 * bc * dp + br * bc) <= hw.sram_bytes // 2 or bc == 64
    assert default_blocks(64, hw.replace(sram_bytes=1024 * 1024)) == (64, 640)
    small = hw.replace(sram_bytes=256 * 1024)
    assert default_blocks(64, small)[1] < default_blocks(64, hw.replace(sram_bytes=2 * 1024 * 1024))[1]
    assert effective_blocks(7, 20) == (8, 32)
    with pytest.raises(FlashsimError, match="positive integer"):
        default_blocks(0)


def _traced_peak(fn, *args, **kwargs):
    tracemalloc.start()
    tracemalloc.reset_peak()
    try:
        base = tracemalloc.get_traced_memory()[0]
        fn(*args, **kwargs)
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def test_extra_memory_is_linear_in_n():
    """tracemalloc sees every array the kernel uses: flash_attention_cpu allocates all of them with numpy and
    hands them to the compiled code. Besides a fixed per-thread workspace (one S tile and accumulator per core),
    quadrupling N quadruples the flash peak; the naive one grows 16x."""
    block = dict(block_r=64, block_c=64)
    workspace = flash_extra_bytes(1024, 64, **block) - flash_extra_bytes(1024, 64, threads=0, **block)
    peaks = {}
    for n in (1024, 4096):
        q, k, v = qkv((n, 64), seed=n)
        flash_attention_cpu(q[:64], k[:64], v[:64], **block)  # compiled already
        peaks[n] = _traced_peak(flash_attention_cpu, q, k, v, **block)
        # the output plus what flash_extra_bytes counts, and nothing N x N
        assert peaks[n] <= q.nbytes + flash_extra_bytes(n, 64, **block) + 64 * 1024
    assert peaks[4096] < naive_extra_bytes(4096, 64) / 8
    assert 3.0 < (peaks[4096] - workspace) / (peaks[1024] - workspace) < 5.0
    naive = {n: _traced_peak(naive_attention_numpy, *qkv((n, 64), seed=n)) for n in (512, 1024)}
    assert naive[1024] >= naive_extra_bytes(1024, 64)
    assert naive[1024] / naive[512] > 3.5


@pytest.mark.parametrize("bad,match", [
    (lambda q: (q.astype(np.float64), q, q), "float32"),
    (lambda q: (q[None, None], q, q), "same number of dimensions"),
    (lambda q: (q[0], q[0], q[0]), r"\(N, d\) or \(B, H, N, d\)"),
    (lambda q: (q[None], q[None], q[None]), r"\(N, d\) or \(B, H, N, d\)"),
    (lambda q: (q, q[:5], q), "same shape"),
    (lambda q: (q, q, q[:, :8]), "same shape"),
    (lambda q: (q.tolist(), q, q), "numpy array"),
    (lambda q: (q[:0], q[:0], q[:0]), "at least 1"),
])
def test_bad_input(bad, match):
    q = np.zeros((10, 16), np.float32)
    with pytest.raises(FlashsimError, match=match):
        flash_attention_cpu(*bad(q))


@pytest.mark.parametrize("kwargs", [dict(block_r=0), dict(block_c=-16), dict(block_r=2.5), dict(block_c=True),
                                    dict(sm_scale=0.0), dict(sm_scale=float("nan"))])
def test_bad_blocks_and_scale(kwargs):
    q = np.zeros((10, 16), np.float32)
    with pytest.raises(FlashsimError, match="must be a positive"):
        flash_attention_cpu(q, q, q, **kwargs)


def test_naive_rejects_bad_input():
    q = np.zeros((10, 16), np.float32)
    with pytest.raises(FlashsimError, match="float32"):
        naive_attention_numpy(q, q, q.astype(np.float16))
