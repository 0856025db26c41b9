"""Split-KV decoding (flash-decoding) kernel: agrees with one-pass attention; its bytes equal the closed form
(Triton interpreter on CPU; the same tests run compiled on a GPU)."""
import pytest
import torch

from flashsim.errors import FlashsimError
from flashsim.kernels import INTERPRETER
from flashsim.kernels.split_kv import split_kv_attention, split_plan
from flashsim.model.attention.online_softmax import combine_partials
from flashsim.model.multi.closed_forms import split_kv_bytes
from kernel_inputs import reference

DEV = "cpu" if INTERPRETER else "cuda"
#: float32 error bound of outputs (o, lse): on a GPU Triton's float32 tl.dot multiplies in tf32 (10-bit mantissa),
#: which on these cases gives up to 4.3e-4 (host emulation: operands rounded to tf32, products summed in fp32); the
#: interpreter's dot is exact fp32
F32_TOL = 2e-5 if INTERPRETER else 2e-3
LSE_TOL = 1e-4 if INTERPRETER else 2e-3


def _inputs(b, h, nq, n, d, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, nq, d, generator=g)
    k = torch.randn(b, h, n, d, generator=g)
    v = torch.randn(b, h, n, d, generator=g)
    return (x.to(dtype).to(DEV) for x in (q, k, v))


@pytest.mark.parametrize("dtype, tol", [(torch.float32, F32_TOL), (torch.float16, 2e-3)])
@pytest.mark.parametrize("shape, splits", [((1, 2, 1, 200, 16), 4),      # decoding: one query row, ragged N
                                           ((2, 1, 3, 100, 24), 3),      # d not a power of two
                                           ((1, 1, 1, 96, 16), 1)])      # the kernel without the split
def test_split_kv_matches_one_pass_attention(shape, splits, dtype, tol):
    q, k, v = _inputs(*shape, dtype)
    o, lse = split_kv_attention(q, k, v, num_splits=splits)
    ref_o, ref_lse = (x.to(DEV) for x in reference(q, k, v, return_lse=True))   # the one float64 reference
    assert o.dtype == dtype and o.shape == q.shape and lse.shape == q.shape[:3]
    assert (o.double() - ref_o).abs().max() < tol
    assert (lse.double() - ref_lse).abs().max() < LSE_TOL


def test_same_answer_with_and_without_the_split_and_torch_combine():
    q, k, v = _inputs(1, 2, 1, 256, 32, torch.float32, seed=1)
    # block_n=32 on every device: 256 keys are 8 tiles, so 8 splits (a GPU's default 64-key tile would give only 4)
    o1, l1 = split_kv_attention(q, k, v, num_splits=1, block_n=32)
    o8, l8, (op, lp) = split_kv_attention(q, k, v, num_splits=8, block_n=32, return_partials=True)
    assert op.shape == (1, 2, 8, 1, 32) and lp.shape == (1, 2, 8, 1)
    tol = F32_TOL / 2                                # one split against eight: both round alike but for p's scale
    assert torch.allclose(o1, o8, atol=tol) and torch.allclose(l1, l8, atol=tol)
    # the one merge (flashsim.model.attention.online_softmax) gives the combine kernel's answer
    oc, lc = combine_partials(op.double().cpu().numpy().transpose(2, 0, 1, 3, 4),
                              lp.double().cpu().numpy().transpose(2, 0, 1, 3))
    assert torch.allclose(torch.from_numpy(oc).float(), o8.cpu(), atol=1e-6)
    assert torch.allclose(torch.from_numpy(lc).float(), l8.cpu(), atol=1e-6)


def test_split_plan_uses_whole_tiles():
    assert split_plan(1000, 4, 32) == (256, 4)
    assert split_plan(100, 8, 32) == (32, 4)
    assert split_plan(65536, 264, 64) == (256, 256)
    with pytest.raises(FlashsimError, match="num_splits"):
        split_plan(100, 0, 32)


def test_bad_shapes_are_clear_errors():
    q, k, v = _inputs(1, 1, 1, 64, 16, torch.float32)
    with pytest.raises(FlashsimError, match="shapes do not match"):
        split_kv_attention(q, k[..., :8], v)


@pytest.mark.skipif(not INTERPRETER, reason="byte counting runs in the interpreter")
@pytest.mark.parametrize("splits", [1, 3])
def test_measured_bytes_equal_the_closed_form(splits):
    from flashsim.measure import count_io
    n, d, h = 160, 16, 2
    q, k, v = _inputs(1, h, 1, n, d, torch.float16)
    io = count_io(split_kv_attention, q, k, v, num_splits=splits)
    eff = split_plan(n, splits, 32)[1]
    want = split_kv_bytes(n, d, eff, nq=1, heads=h, dtype="fp16")
    got = {}
    for launch in io.launches:
        key = "split" if "split" in launch["name"] else "combine"
        got[key] = {"loads": dict(launch["loads"]), "stores": dict(launch["stores"])}
    assert got == want
