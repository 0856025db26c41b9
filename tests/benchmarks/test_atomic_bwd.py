"""benchmarks/experiments/atomic_bwd.py (dQ by fp32 atomic adds, FA2's own backward) still runs in the Triton
interpreter: gradients within 2x torch's own error against float64, equal to the package's backward within
tolerance, and its bytes are the package's K/V pass plus one fp32 read and write of dQ per K/V row block."""
import pytest
import torch

import flashsim.kernels as K
from benchmarks.experiments import atomic_bwd as A
from flashsim.measure import count_io, make_inputs
from flashsim.model.attention.reference import reference_attention_grads
from flashsim.model.kernel_io import kernel_io

pytestmark = pytest.mark.skipif(not K.INTERPRETER, reason="interpreter tests (a CUDA GPU is present)")


def rel(a, ref):
    ref = torch.from_numpy(ref)
    return float((a.double() - ref).norm() / ref.norm())


# (N, d, causal, dtype, block_m, block_n): ragged N, padded d, unequal blocks both ways
@pytest.mark.parametrize("N,d,causal,dtype,bm,bn", [(97, 80, True, torch.float16, 32, 16),
                                                    (130, 16, False, torch.float32, 16, 32)])
def test_atomic_backward_within_2x_torch_error_and_equals_the_package(N, d, causal, dtype, bm, bn):
    g = torch.Generator().manual_seed(N * d + causal)
    q, k, v, do = (torch.randn(1, 2, N, d, generator=g).to(dtype) for _ in range(4))
    o, lse = K.flash_forward(q, k, v, causal=causal, block_m=bm, block_n=bn)
    ours = A.flash_backward_atomic(q, k, v, o, lse, do, causal=causal, block_m=bm, block_n=bn)
    sep = K.flash_backward(q, k, v, o, lse, do, causal=causal, block_m=bm, block_n=bn)
    exact = reference_attention_grads(*(x.double().numpy() for x in (q, k, v, do)), causal=causal)
    qt, kt, vt = (x.clone().requires_grad_() for x in (q, k, v))
    theirs = torch.autograd.grad(torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal),
                                 (qt, kt, vt), do)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-3, atol=2e-3)
    for name, a, s, t, x in zip("qkv", ours, sep, theirs, exact):
        assert a.dtype == dtype and torch.isfinite(a).all(), f"d{name}"
        assert rel(a, x) <= 2 * rel(t, x), f"d{name}"
        torch.testing.assert_close(a, s, **tol)


def test_atomic_bytes_are_the_kv_pass_plus_fp32_dq_read_modify_write():
    n, d, bm, bn, causal = 97, 24, 32, 16, True
    q, k, v, do = make_inputs("flash_bwd", n, d, "fp32", batch=1, heads=2)
    o, lse = K.flash_forward(q, k, v, causal=causal, block_m=bm, block_n=bn)
    measured = count_io(lambda: A.flash_backward_atomic(q, k, v, o, lse, do, causal=causal, block_m=bm, block_n=bn))
    assert [L["name"] for L in measured.launches] == ["_bwd_preprocess", "_bwd_dkdv_atomic"]
    sep = kernel_io("flash_bwd", n, d, bm, bn, causal, "fp32", batch=1, heads=2).per_tensor()
    atomic = measured.per_tensor()["_bwd_dkdv_atomic"]
    assert atomic["loads"]["DQ"] == atomic["stores"]["DQ"] == sep["_bwd_dkdv"]["loads"]["LSE"] * d
    assert {t: b for t, b in atomic["loads"].items() if t != "DQ"} == sep["_bwd_dkdv"]["loads"]
    assert measured.per_tensor()["_bwd_preprocess"] == sep["_bwd_preprocess"]


def test_count_io_restores_the_atomic_hook():
    from triton.runtime.interpreter import InterpreterBuilder
    before = getattr(InterpreterBuilder, "create_atomic_rmw", None)
    q, k, v, do = make_inputs("flash_bwd", 40, 16, "fp32")
    o, lse = K.flash_forward(q, k, v)
    count_io(lambda: A.flash_backward_atomic(q, k, v, o, lse, do))
    assert getattr(InterpreterBuilder, "create_atomic_rmw", None) is before
