"""flashsim.kernels in the Triton interpreter: correctness against float64, clear errors, readable source."""
import inspect
import re

import pytest
import torch
import torch.nn.functional as F

import flashsim.kernels as K
from flashsim.errors import FlashsimError
from kernel_inputs import random_qkvdo, reference, reference_grads, rel

pytestmark = pytest.mark.skipif(not K.INTERPRETER, reason="interpreter tests (a CUDA GPU is present)")


# (N, d, causal, dtype, block_m, block_n): ragged N (97, 130), d=80/96 (padded), causal and not
ATTN_CASES = [
    (97, 80, True, torch.float16, 32, 16),
    (130, 16, False, torch.float32, 16, 32),
    (64, 96, True, torch.float32, 32, 32),
    (80, 128, False, torch.float16, 32, 32),
]


@pytest.mark.parametrize("N,d,causal,dtype,bm,bn", ATTN_CASES)
def test_attention_forward_backward_within_2x_torch_error(N, d, causal, dtype, bm, bn):
    q, k, v, do = random_qkvdo(N, d, dtype, seed=N * d + causal, grad=True)
    do = do.detach()
    o = K.attention(q, k, v, causal=causal, block_m=bm, block_n=bn)
    o.backward(do)
    ref = reference(q, k, v, causal)                                   # the one float64 reference
    grads = reference_grads(q, k, v, do, causal)
    qt, kt, vt = (x.detach().clone().requires_grad_() for x in (q, k, v))
    ot = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
    ot.backward(do)
    for ours, theirs, exact in [(o, ot, ref), (q.grad, qt.grad, grads[0]), (k.grad, kt.grad, grads[1]),
                                (v.grad, vt.grad, grads[2])]:
        assert torch.isfinite(ours).all()          # outputs start as NaN: every element was written
        assert rel(ours, exact) <= 2 * rel(theirs, exact)


def test_flash_forward_odd_1025_causal_fp16():
    q, k, v, _ = random_qkvdo(1025, 16, torch.float16, seed=7, H=1)
    o, lse = K.flash_forward(q, k, v, causal=True, block_m=64, block_n=64)
    ref, ref_lse = reference(q, k, v, causal=True, return_lse=True)
    theirs = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert torch.isfinite(o).all() and torch.isfinite(lse).all()
    assert rel(o, ref) <= 2 * rel(theirs, ref)
    torch.testing.assert_close(lse.double(), ref_lse, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("N,d,causal,dtype", [(97, 80, True, torch.float16), (64, 32, False, torch.float32)])
def test_naive_attention_matches_reference(N, d, causal, dtype):
    q, k, v, _ = random_qkvdo(N, d, dtype, seed=3)
    o, s, p = K.naive_attention(q, k, v, causal=causal, block_m=32, block_n=32, return_intermediates=True)
    ref = reference(q, k, v, causal)
    theirs = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert torch.isfinite(o).all()
    assert rel(o, ref) <= 2 * rel(theirs, ref)
    assert torch.isfinite(p).all()                 # S and P are written in full, also when causal
    if causal:
        upper = torch.ones(N, N, dtype=torch.bool).triu(1)
        assert (p[..., upper] == 0).all() and torch.isinf(s[..., upper]).all()


@pytest.mark.parametrize("causal", [False, True])
def test_tiled_matmul(causal):
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(97, 40, generator=g), torch.randn(40, 75, generator=g)
    c = K.tiled_matmul(a, b, block_m=32, block_n=32, block_k=16, causal=causal)
    ref = a.double() @ b.double()
    theirs = a @ b
    if causal:                                     # tiles (32 x 32) wholly above the diagonal stay NaN
        i, j = torch.arange(97)[:, None] // 32, torch.arange(75)[None, :] // 32
        keep = (j * 32 <= i * 32 + 31)
        assert torch.isnan(c[~keep]).all()
        c, ref, theirs = c[keep], ref[keep], theirs[keep]
    assert torch.isfinite(c).all()
    assert rel(c, ref) <= 2 * rel(theirs, ref) + 1e-7


@pytest.mark.parametrize("causal,dtype", [(False, torch.float32), (True, torch.float16)])
def test_online_softmax(causal, dtype):
    x = torch.randn(97, 130, generator=torch.Generator().manual_seed(2)).to(dtype)
    p, lse = K.online_softmax(x, causal=causal, block_m=32, block_n=32)
    xd = x.double()
    if causal:
        xd = xd.masked_fill(torch.ones(97, 130, dtype=torch.bool).triu(1), float("-inf"))
    ref = torch.softmax(xd, 1)
    theirs = torch.softmax(x.masked_fill(torch.isinf(xd), float("-inf")), 1)
    assert torch.isfinite(p).all()
    assert rel(p, ref) <= 2 * rel(theirs, ref) + 1e-7
    torch.testing.assert_close(lse.double(), torch.logsumexp(xd, 1), rtol=1e-5, atol=1e-5)


# --- bad input gets a clear FlashsimError, never a Triton trace ----------------------------------------------

def test_bf16_in_interpreter_is_a_clear_error():
    q = torch.randn(1, 1, 32, 16, dtype=torch.bfloat16)
    with pytest.raises(FlashsimError, match="bf16.*interpreter"):
        K.flash_forward(q, q, q)


@pytest.mark.parametrize("make,match", [
    (lambda: [torch.randn(1, 1, 8, 300)] * 3, "head dim d=300 > 256"),
    (lambda: [torch.randn(1, 1, 8, 16), torch.randn(1, 1, 9, 16), torch.randn(1, 1, 8, 16)], "shapes differ"),
    (lambda: [torch.randn(1, 1, 8, 16), torch.randn(1, 1, 8, 16).half(), torch.randn(1, 1, 8, 16)], "dtypes differ"),
    (lambda: [torch.randn(8, 16)] * 3, "must have 4 dims"),
    (lambda: [torch.empty(1, 1, 8, 16, device="meta")] * 3, "CPU tensors"),
    (lambda: [torch.ones(1, 1, 8, 16, dtype=torch.int32)] * 3, "not supported"),
    (lambda: [torch.randn(1, 1, 8, 16).numpy()] * 3, "torch.Tensor"),
])
def test_bad_attention_input(make, match):
    with pytest.raises(FlashsimError, match=match):
        K.flash_forward(*make())


def test_bad_blocks_and_scale_and_lse():
    q = torch.randn(1, 1, 32, 16)
    with pytest.raises(FlashsimError, match="power of two"):
        K.flash_forward(q, q, q, block_m=48)
    with pytest.raises(FlashsimError, match="sm_scale"):
        K.flash_forward(q, q, q, sm_scale=-1.0)
    with pytest.raises(FlashsimError, match="lse"):
        K.flash_backward(q, q, q, q, torch.zeros(1, 1, 31), q)
    with pytest.raises(FlashsimError, match="inner dims"):
        K.tiled_matmul(torch.randn(4, 5), torch.randn(6, 4))


# every kernel entry point checks its arguments the same way (issue 13 item 12): block_m=0 is not "the default"
ENTRY_POINTS = {
    "flash_forward": lambda q, **kw: K.flash_forward(q, q, q, **kw),
    "flash_backward": lambda q, **kw: K.flash_backward(q, q, q, q, torch.zeros(1, 1, 32), q, **kw),
    "attention": lambda q, **kw: K.attention(q, q, q, **kw),
    "naive_attention": lambda q, **kw: K.naive_attention(q, q, q, **kw),
    "split_kv_attention": lambda q, **kw: __import__("flashsim.kernels.split_kv", fromlist=["x"]).split_kv_attention(
        q, q, q, **kw),
    "tiled_matmul": lambda q, **kw: K.tiled_matmul(q[0, 0], q[0, 0].T.contiguous(), **kw),
    "online_softmax": lambda q, **kw: K.online_softmax(q[0, 0], **kw),
}
SCALED = ("flash_forward", "flash_backward", "attention", "naive_attention", "split_kv_attention")


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
@pytest.mark.parametrize("kw,match", [
    (dict(block_m=0), "block_m=0 must be a power of two"), (dict(block_n=0), "block_n=0 must be a power of two"),
    (dict(block_m=32.0), "block_m=32.0 must be an integer"), (dict(block_n=True), "block_n=True"),
    (dict(causal="False"), "causal='False' must be True or False"),
    (dict(sm_scale=float("inf")), "finite number > 0"), (dict(sm_scale=float("nan")), "finite number > 0"),
    (dict(sm_scale=0.0), "finite number > 0"), (dict(sm_scale="0.1"), "sm_scale='0.1' must be a number"),
])
def test_every_entry_point_rejects_bad_arguments_naming_the_fix(name, kw, match):
    if "sm_scale" in kw and name not in SCALED or "causal" in kw and name == "split_kv_attention":
        pytest.skip("this entry point has no such argument")
    q = torch.randn(1, 1, 32, 16)
    with pytest.raises(FlashsimError, match=match):
        ENTRY_POINTS[name](q, **kw)


def test_forward_launch_policy_gives_wide_tiles_8_warps():
    """A 128x128 score tile over 4 warps with pointer loads spills on sm_90 (its local memory reaches DRAM as
    writes the kernel view does not have): 128-row Q blocks get 8 warps with 128-row K/V blocks (pointer loads) or
    a head dim of 128; through TMA a 128x128 tile at d=64 keeps 4; explicit wins."""
    from flashsim.kernels._common import forward_launch_options as opts
    assert opts(64, 128, block_n=128) == {"num_warps": 8}
    assert opts(128, 128, block_n=64) == {"num_warps": 8}
    assert opts(128, 64, block_n=128) == {"num_warps": 4}
    assert opts(64, 128, block_n=64) == {} and opts(64, 64, block_n=128) == {}
    assert opts(64, 128, 4, 2, block_n=128) == {"num_warps": 4, "num_stages": 2}
    assert opts(64, 128, block_n=128, tma=True) == {} and opts(128, 128, block_n=128, tma=True) == {"num_warps": 8}


def test_bad_launch_options_and_splits():
    from flashsim.kernels.split_kv import split_kv_attention
    q = torch.randn(1, 1, 32, 16)
    with pytest.raises(FlashsimError, match="num_warps=3"):
        K.flash_forward(q, q, q, num_warps=3)
    with pytest.raises(FlashsimError, match="num_stages=0"):
        K.flash_forward(q, q, q, num_stages=0)
    with pytest.raises(FlashsimError, match="tma='yes' must be True or False"):
        K.flash_forward(q, q, q, tma="yes")
    with pytest.raises(FlashsimError, match="num_splits=2.5"):
        split_kv_attention(q, q, q, num_splits=2.5)


def test_attention_uses_its_blocks_in_backward_too():
    """Issue 13 item 5: attention(..., block_m=64, block_n=64) moves the bytes of 64x64 blocks in both passes."""
    from flashsim.measure import count_io
    from flashsim.model.kernel_io import kernel_io
    n, d = 130, 16
    q, k, v, do = random_qkvdo(n, d, torch.float32, seed=5, H=1)
    xs = [x.clone().requires_grad_() for x in (q, k, v)]
    measured = count_io(lambda: torch.autograd.grad(K.attention(*xs, causal=True, block_m=64, block_n=64), xs, do))
    fwd = kernel_io("flash_fwd", n, d, 64, 64, True, "fp32", heads=1).per_tensor()
    bwd = kernel_io("flash_bwd", n, d, 64, 64, True, "fp32", heads=1).per_tensor()
    assert measured.per_tensor() == {**fwd, **bwd}
    small = kernel_io("flash_bwd", n, d, 32, 32, True, "fp32", heads=1)
    assert sum(v for L in bwd.values() for v in L["loads"].values()) != small.load_bytes


def test_interpreter_self_check_catches_silent_zeros(monkeypatch):
    from flashsim.kernels import _common
    K.interpreter_self_check(force=True)               # the real interpreter passes

    class Broken:                                       # a kernel launch that writes nothing, as a bad numpy does
        def __getitem__(self, grid):
            return lambda *a, **kw: None
    monkeypatch.setattr(_common, "_self_check_kernel", Broken())
    with pytest.raises(FlashsimError, match="do not work together"):
        K.interpreter_self_check(force=True)
    monkeypatch.undo()
    K.interpreter_self_check(force=True)


def test_interpreter_flag():
    import os
    assert K.INTERPRETER is True and os.environ.get("TRITON_INTERPRET") == "1"
    assert K.default_blocks("flash_fwd") == (32, 32)


# --- the source is written to be read ------------------------------------------------------------------------

CHAPTERS = {"naive": "chapter 02", "matmul": "chapter 03", "softmax": "chapter 04", "flash_fwd": "chapter 05",
            "flash_bwd": "chapter 07"}


@pytest.mark.parametrize("module", sorted(CHAPTERS))
def test_docstring_chapter_and_traffic_comments(module):
    mod = __import__(f"flashsim.kernels.{module}", fromlist=["x"])
    assert CHAPTERS[module] in mod.__doc__
    lines = inspect.getsource(mod).splitlines()
    n_mem = 0
    for i, line in enumerate(lines):
        if re.search(r"\btl\.(load|store)\(|\b(desc_\w+|DESC_\w+)\.(load|store)\(", line):
            n_mem += 1                    # pointer or tensor-descriptor access: commented on or just above it
            window = " ".join(lines[max(0, i - 1):i + 1])
            assert re.search(r"# (reads|writes) ", window), f"{module}:{i + 1} lacks a traffic comment: {line}"
    assert n_mem >= 2
    if module == "flash_fwd":
        assert "chapter 08" in mod.__doc__


# --- tensor descriptors (TMA, chapter 12): same numbers as the pointer loads --------------------------------

@pytest.mark.parametrize("N,d,causal,bm,bn", [(97, 64, True, 32, 16), (96, 32, False, 16, 32), (64, 16, True, 16, 16)])
def test_tma_path_equals_pointer_path(N, d, causal, bm, bn):
    q, k, v, do = random_qkvdo(N, d, torch.float32, seed=N + d)
    o0, l0 = K.flash_forward(q, k, v, causal=causal, block_m=bm, block_n=bn, tma=False)
    o1, l1 = K.flash_forward(q, k, v, causal=causal, block_m=bm, block_n=bn, tma=True)
    assert torch.equal(o0, o1) and torch.equal(l0, l1)            # ragged rows: zero-filled loads, dropped stores
    g0 = K.flash_backward(q, k, v, o0, l0, do, causal=causal, block_m=bm, block_n=bn, tma=False)
    g1 = K.flash_backward(q, k, v, o0, l0, do, causal=causal, block_m=bm, block_n=bn, tma=True)
    for a, b in zip(g0, g1):
        assert torch.equal(a, b)


def test_tma_requested_where_it_cannot_work_is_a_clear_error():
    q, k, v, _ = random_qkvdo(32, 80, torch.float32, seed=3)
    with pytest.raises(FlashsimError, match="head dim 80 .* tma=False"):
        K.flash_forward(q, k, v, tma=True)
    strided = torch.randn(1, 2, 32, 64 * 2)[..., ::2]              # stride 2 along d
    with pytest.raises(FlashsimError, match="contiguous"):
        K.flash_forward(strided, strided, strided, tma=True)
    assert K.flash_forward(q, k, v)[0].isfinite().all()            # default: pointer loads, no error


def test_interpreter_never_picks_tma_or_tuned_configs_by_default():
    from flashsim.kernels._common import TUNED_H200, tuned_config, use_tma
    q, k, v, _ = random_qkvdo(32, 64, torch.float32, seed=4)
    assert use_tma(None, (q, k, v), 64, 64) is False                # count_io counts pointer loads
    assert tuned_config("flash_fwd", 64, False) is None
    for (kernel, block_d, causal), (bm, bn, warps, stages) in TUNED_H200.items():
        assert kernel in ("flash_fwd", "flash_bwd_dkdv", "flash_bwd_dq") and isinstance(causal, bool)
        assert all(x >= 16 and x & (x - 1) == 0 for x in (bm, bn, block_d)) and warps in (4, 8) and stages >= 1


def test_tuned_configs_only_on_hopper(monkeypatch):
    from flashsim.kernels import _common
    monkeypatch.setattr(_common, "interpreting", lambda: False)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (8, 0))      # an A100
    assert _common.tuned_config("flash_bwd_dq", 128, False) is None                    # 197 KB smem: not there
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))      # an H100/H200
    assert _common.tuned_config("flash_bwd_dq", 128, False) == _common.TUNED_H200[("flash_bwd_dq", 128, False)]
    assert _common.tuned_config("flash_bwd_dq", 256, False) is None                    # no entry: default blocks


def test_tma_by_default_only_for_validated_head_dims(monkeypatch):
    from flashsim.kernels import _common
    monkeypatch.setattr(_common, "interpreting", lambda: False)                      # as on a GPU
    q = torch.zeros(1, 1, 8, 32)
    for d in (16, 32, 256):                                                            # not validated on the H200
        assert d not in _common.TMA_VALIDATED_HEAD_DIMS
        assert _common.use_tma(None, (q,), d, d) is False


def test_pointer_load_exceptions_are_tuned_kernels_backed_by_the_sweeps():
    """POINTER_LOADS_H200 names launches whose tuned configuration ran faster with pointer loads than with TMA in
    every committed H200 sweep that timed both (N=4096 and N=16384)."""
    import json
    from pathlib import Path

    from flashsim.kernels._common import POINTER_LOADS_H200, TUNED_H200
    results = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    names = {"flash_bwd_dkdv": "dkdv", "flash_bwd_dq": "dq", "flash_fwd": "fwd"}
    assert POINTER_LOADS_H200
    for kernel, block_d, causal in POINTER_LOADS_H200:
        config = TUNED_H200[(kernel, block_d, causal)]
        times = {}
        for name in ("tune_h200_2026-11-30.json", "tune_h200_2026-11-30_bwd_n16384_d64.json"):
            for r in json.loads((results / name).read_text())["results"]:
                if ((r["kernel"], r["d"], r["causal"]) == (names[kernel], block_d, causal)
                        and (r["bm"], r["bn"], r["w"], r["s"]) == config[:4]):
                    times.setdefault(name, {})[r["tma"]] = r["ms"]
        assert len(times) == 2 and all(t[False] < t[True] for t in times.values()), times


def test_output_buffers_are_poisoned_in_the_interpreter_and_on_request(monkeypatch):
    from flashsim.kernels import _common
    x = torch.zeros(3, 4)
    assert _common.output_like(x).isnan().all()                        # the interpreter: always NaN
    monkeypatch.setattr(_common, "interpreting", lambda: False)
    monkeypatch.delenv("FLASHSIM_POISON", raising=False)
    assert not _common.poison_outputs()                                  # a GPU: uninitialised, like torch's
    assert _common.output_like(x, (2, 5), torch.float64).shape == (2, 5)
    monkeypatch.setenv("FLASHSIM_POISON", "1")
    assert _common.output_like(x, (2, 5)).isnan().all()
