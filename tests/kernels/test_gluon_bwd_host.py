"""The Gluon backward's host passes (flashsim.kernels.gluon.bwd_host): plain Triton kernels, so they run where the
backend runs them (the interpreter on a CPU, compiled on a CUDA GPU, on tensors of that device); checked against
torch on random inputs, ragged N included (the Gluon main kernel itself is GPU-only: tests/kernels/test_gluon.py)."""
import pytest
import torch

from flashsim.kernels import INTERPRETER  # picks the Triton backend first: the interpreter on a CPU
from flashsim.kernels.gluon.bwd_host import bwd_prologue, dq_epilogue, n_lse_of

#: the device the backend's kernels take tensors on (a Triton kernel compiled for the GPU cannot read CPU tensors)
DEV = "cpu" if INTERPRETER else "cuda"


def padded_rows(x):
    """The torch form of the rows the prologue writes: (B, H, N) fp32 as (B*H, n_lse_of(N)), zeros past N."""
    B, H, N = x.shape
    rows = torch.zeros((B * H, n_lse_of(N)), dtype=torch.float32, device=x.device)
    rows[:, :N] = x.reshape(B * H, N)
    return rows


def _inputs(N, d=64, B=2, H=3, dtype=torch.float16, seed=0):
    g = torch.Generator().manual_seed(seed)
    o = torch.randn(B, H, N, d, generator=g).to(dtype)
    do = torch.randn(B, H, N, d, generator=g).to(dtype)
    lse = torch.randn(B, H, N, generator=g) + 3.0
    return o.to(DEV), do.to(DEV), lse.to(DEV)


@pytest.mark.parametrize("N", [1, 64, 97, 130])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_prologue_writes_delta_padded_rows_and_zeroes_dq(N, dtype):
    o, do, lse = _inputs(N, dtype=dtype, seed=N)
    lse_rows, delta_rows, dq_acc = bwd_prologue(o, do, lse)
    B, H = o.shape[:2]
    n_lse = n_lse_of(N)
    assert n_lse % 4 == 0 and n_lse >= N and lse_rows.shape == delta_rows.shape == (B * H, n_lse)
    delta = (o.float() * do.float()).sum(-1)
    torch.testing.assert_close(delta_rows, padded_rows(delta), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lse_rows, padded_rows(lse), rtol=0, atol=0)
    assert torch.all(delta_rows[:, N:] == 0) and torch.all(lse_rows[:, N:] == 0)
    assert dq_acc.shape == o.shape and dq_acc.dtype == torch.float32 and torch.all(dq_acc == 0)


def test_prologue_with_a_given_delta_and_unpadded_rows():
    o, do, lse = _inputs(97)
    delta = torch.randn(lse.shape, device=DEV)
    lse_rows, delta_rows, _ = bwd_prologue(o, do, lse, delta)
    assert torch.equal(delta_rows[:, :97], delta.view(-1, 97)) and torch.all(delta_rows[:, 97:] == 0)
    lse_rows, delta_rows, _ = bwd_prologue(o, do, lse, delta, n_lse=97)   # the pointer-load kernel's rows: views
    assert torch.equal(lse_rows, lse.view(-1, 97)) and torch.equal(delta_rows, delta.view(-1, 97))
    with pytest.raises(ValueError, match="n_lse 96 < N 97"):
        bwd_prologue(o, do, lse, n_lse=96)


def test_rows_start_every_head_16_byte_aligned_and_are_views_where_they_can_be():
    """The LSE_SMEM descriptors' rows: N rounded up to 4 fp32 (a TMA copy must start 16-byte aligned), views of the
    inputs where N already is a multiple of 4, zero-padded copies otherwise."""
    for n in (1, 3, 4, 17, 1000, 1001):
        o, do, lse = _inputs(n, d=16, seed=n)
        delta = torch.randn(lse.shape, device=DEV)
        a, b, _ = bwd_prologue(o, do, lse, delta)
        n_lse = n_lse_of(n)
        assert n_lse % 4 == 0 and n_lse - n < 4 and a.shape == b.shape == (6, n_lse)
        assert torch.equal(a, padded_rows(lse)) and torch.equal(b, padded_rows(delta))
        assert (a.data_ptr() == lse.data_ptr()) == (b.data_ptr() == delta.data_ptr()) == (n % 4 == 0)
        assert a.is_contiguous() and b.is_contiguous() and a.data_ptr() % 16 == 0 and b.data_ptr() % 16 == 0


@pytest.mark.parametrize("numel_shape", [(2, 3, 97, 64), (1, 1, 1, 16), (5000,)])
def test_epilogue_rounds_like_torch_in_one_pass(numel_shape):
    acc = (torch.randn(numel_shape, generator=torch.Generator().manual_seed(1)) * 40).to(DEV)
    for dtype in (torch.float16, torch.float32):
        got = dq_epilogue(acc, 0.125, dtype)
        assert got.dtype == dtype and torch.equal(got, (acc * 0.125).to(dtype))


@pytest.mark.parametrize("N", [1, 64, 97])
def test_prologue_scales_l_by_log2e_for_lse_log2(N):
    """lse_log2: the rows hold L·log2(e) (always a copy, padded like the others), the product the main kernel would
    otherwise form on every visit, rounded the same way (fp32 times the fp32 constant)."""
    from flashsim.model.attention import online_softmax

    o, do, lse = _inputs(N, seed=N)
    lse_rows, delta_rows, _ = bwd_prologue(o, do, lse, lse_log2=True)
    log2e = torch.tensor(online_softmax.LOG2E, dtype=torch.float32)
    torch.testing.assert_close(lse_rows, padded_rows(lse * log2e.to(DEV)), rtol=0, atol=0)
    assert lse_rows.data_ptr() != lse.data_ptr()
    plain, _, _ = bwd_prologue(o, do, lse)
    torch.testing.assert_close(delta_rows, bwd_prologue(o, do, lse)[1], rtol=0, atol=0)
    assert not torch.equal(plain, lse_rows)
