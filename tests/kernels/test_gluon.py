"""flashsim.kernels.gluon: the Hopper-only Gluon forward.

On any machine: the guarded import reports unavailability cleanly, with a reason, and path selection falls back to
the Triton kernel. On a Hopper GPU (skipped elsewhere, with the reason): the forward against float64, within 2x
PyTorch's own error, on ragged N, both dtypes, both head dims, causal or not.
"""
import pytest
import torch
import torch.nn.functional as F

import flashsim.kernels.gluon as G
from kernel_inputs import reference

AVAILABLE, REASON = G.available()


def test_available_reports_a_reason_and_never_raises():
    ok, why = G.available()
    assert isinstance(ok, bool) and isinstance(why, str) and why
    if not torch.cuda.is_available():
        assert not ok
        assert "GPU" in why or "TRITON_INTERPRET" in why


@pytest.mark.skipif(AVAILABLE, reason="the Gluon path is available here; this checks the fallback")
def test_path_selection_picks_triton_without_hopper():
    q = torch.randn(1, 2, 64, 64, dtype=torch.float16)
    path, why = G.forward_path(q, q, q, causal=True)
    assert path == "triton" and why
    with pytest.raises(RuntimeError, match="gluon_forward"):
        G.gluon_forward(q, q, q)


def test_configs_cover_every_head_dim_and_mask():
    for d in G.HEAD_DIMS:
        for causal in (False, True):
            cfg = G.FWD_CONFIGS[(d, causal)]
            assert cfg["NC"] in (2, 3) and cfg["BLOCK_N"] & (cfg["BLOCK_N"] - 1) == 0
            # shared memory: 2 Q buffers per consumer + the K and V rings, under the 227 KB of an H100/H200
            smem = 2 * (2 * cfg["NC"] * 64 * d + 2 * cfg["STAGES"] * cfg["BLOCK_N"] * d)
            assert smem <= 227 * 1024


hopper = pytest.mark.skipif(not AVAILABLE, reason=f"Gluon forward unavailable: {REASON}")


@hopper
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n", [1, 100, 1000, 2085])
def test_gluon_forward_within_2x_torch_error(dtype, d, causal, n):
    torch.manual_seed(n + d)
    q, k, v = (torch.randn(2, 3, n, d, device="cuda", dtype=dtype) for _ in range(3))
    assert G.forward_path(q, k, v, causal)[0] == "gluon"
    o, lse = G.gluon_forward(q, k, v, causal=causal)
    ref, ref_lse = (x.to(q.device) for x in reference(q, k, v, causal, return_lse=True))  # the one float64 reference
    err = lambda x: ((x.double() - ref).norm() / ref.norm()).item()  # noqa: E731
    assert torch.isfinite(o).all() and err(o) <= 2 * err(F.scaled_dot_product_attention(q, k, v, is_causal=causal))
    assert lse.shape == (2, 3, n) and lse.dtype == torch.float32
    assert (lse.double() - ref_lse).abs().max().item() < 1e-3 * max(1.0, ref_lse.abs().max().item())


@hopper
@pytest.mark.gpu
def test_gluon_forward_without_pingpong_is_the_same_function():
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 700, 128, device="cuda", dtype=torch.float16) for _ in range(3))
    a, la = G.gluon_forward(q, k, v, causal=True)
    b, lb = G.gluon_forward(q, k, v, causal=True, pingpong=False)
    # the same wgmma and exponentials in another issue order: the same numbers up to fp16 rounding
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(la, lb)


def test_flash_forward_takes_the_triton_path_off_hopper_and_gluon_true_says_why():
    """flash_forward(gluon=None) falls back to the Triton kernel off Hopper; gluon=True names why it cannot run."""
    import torch

    from flashsim import kernels
    from flashsim.errors import FlashsimError

    if not kernels.INTERPRETER:
        pytest.skip("interpreter-only check (a GPU may run the Gluon path)")
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, 40, 16, generator=g) for _ in range(3))
    o, lse = kernels.flash_forward(q, k, v, block_m=16, block_n=16)
    o2, lse2 = kernels.flash_forward(q, k, v, block_m=16, block_n=16, gluon=False)
    assert torch.equal(o, o2) and torch.equal(lse, lse2)
    with pytest.raises(FlashsimError, match="gluon=True"):
        kernels.flash_forward(q, k, v, gluon=True)
