"""The opt-in FA2 backward (dq_mode="atomic": flashsim.kernels.flash_bwd's K/V pass with DQ_ATOMIC) in the Triton
interpreter.

Gradients within 2x torch's own error against float64, equal to the default dq_mode="separate" within
tolerance, and count_io's bytes (atomic adds counted as loads and stores of fp32 dQ) equal to the kernel view.
"""
import inspect
import re

import pytest
import torch
import torch.nn.functional as F

import flashsim.kernels as K
from flashsim.errors import FlashsimError
from flashsim.model.kernel_io import kernel_io
from flashsim.measure import count_io, make_inputs
from kernel_inputs import random_qkvdo, rel

pytestmark = pytest.mark.skipif(not K.INTERPRETER, reason="interpreter tests (a CUDA GPU is present)")


# (N, d, causal, dtype, block_m, block_n): ragged N (97, 130), d=80 (padded to 128) and 16, causal and not,
# unequal blocks both ways (a K/V block spanning several Q blocks and the reverse)
CASES = [
    (97, 80, True, torch.float16, 32, 16),
    (130, 16, False, torch.float32, 16, 32),
    (130, 16, True, torch.float16, 16, 32),
    (97, 80, False, torch.float32, 32, 16),
]


@pytest.mark.parametrize("N,d,causal,dtype,bm,bn", CASES)
def test_atomic_backward_within_2x_torch_error_and_equals_separate(N, d, causal, dtype, bm, bn):
    q, k, v, do = random_qkvdo(N, d, dtype, seed=N * d + causal)
    o, lse = K.flash_forward(q, k, v, causal=causal, block_m=bm, block_n=bn)
    ours = K.flash_backward(q, k, v, o, lse, do, causal=causal, block_m=bm, block_n=bn, dq_mode="atomic")
    sep = K.flash_backward(q, k, v, o, lse, do, causal=causal, block_m=bm, block_n=bn)
    qd, kd, vd = (x.double().requires_grad_() for x in (q, k, v))
    exact = torch.autograd.grad(F.scaled_dot_product_attention(qd, kd, vd, is_causal=causal), (qd, kd, vd),
                                do.double())
    qt, kt, vt = (x.clone().requires_grad_() for x in (q, k, v))
    theirs = torch.autograd.grad(F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal), (qt, kt, vt), do)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-3, atol=2e-3)
    for name, a, s, t, x in zip("qkv", ours, sep, theirs, exact):
        assert a.dtype == dtype and a.shape == q.shape
        assert torch.isfinite(a).all(), f"d{name}: some element not written"
        assert rel(a, x) <= 2 * rel(t, x), f"d{name}"
        torch.testing.assert_close(a, s, **tol)


def test_autograd_dq_mode_and_default_unchanged():
    q, k, v, do = random_qkvdo(70, 16, torch.float32, seed=3, H=1)
    grads = {}
    for mode in ("separate", "atomic", None):
        xs = [x.clone().requires_grad_() for x in (q, k, v)]
        kw = {} if mode is None else {"dq_mode": mode}
        o = K.attention(*xs, causal=True, block_m=16, block_n=32, **kw)
        grads[mode] = torch.autograd.grad(o, xs, do)
    for a, s, dflt in zip(grads["atomic"], grads["separate"], grads[None]):
        assert torch.equal(s, dflt)                                    # the default is "separate"
        torch.testing.assert_close(a, s, rtol=1e-5, atol=1e-5)
    with pytest.raises(FlashsimError, match="dq_mode"):
        K.attention(q, k, v, dq_mode="fast")
    o, lse = K.flash_forward(q, k, v)
    with pytest.raises(FlashsimError, match="dq_mode"):
        K.flash_backward(q, k, v, o, lse, do, dq_mode="fast")


# (n, d, block_m, block_n, causal, dtype): causal and not, ragged N, padded d, unequal blocks
IO_CONFIGS = [
    (97, 80, 32, 16, True, "fp16"),
    (130, 16, 16, 32, False, "fp32"),
    (100, 24, 32, 32, True, "fp32"),
]


@pytest.mark.parametrize("n,d,bm,bn,causal,dtype", IO_CONFIGS)
def test_count_io_equals_kernel_view_exactly(n, d, bm, bn, causal, dtype):
    q, k, v, do = make_inputs("flash_bwd", n, d, dtype, batch=1, heads=2)
    o, lse = K.flash_forward(q, k, v, causal=causal, block_m=bm, block_n=bn)
    measured = count_io(lambda: K.flash_backward(q, k, v, o, lse, do, causal=causal, block_m=bm, block_n=bn,
                                                 dq_mode="atomic"))
    sim = kernel_io("flash_bwd", n, d, bm, bn, causal, dtype, batch=1, heads=2, dq_mode="atomic")
    assert [L["name"] for L in measured.launches] == [L.name for L in sim.launches] == \
        ["_bwd_preprocess", "_bwd_dkdv"]
    assert measured.load_bytes == sim.load_bytes
    assert measured.store_bytes == sim.store_bytes
    assert measured.per_tensor() == sim.per_tensor()          # per launch, per tensor
    # the atomic adds: fp32 dQ read and written once per K/V row block that sees each Q row
    sep = kernel_io("flash_bwd", n, d, bm, bn, causal, dtype, batch=1, heads=2)
    dkdv = sep.per_tensor()["_bwd_dkdv"]["loads"]
    atomic = sim.per_tensor()["_bwd_dkdv"]
    assert atomic["loads"]["DQ"] == atomic["stores"]["DQ"] == dkdv["LSE"] * d      # q_rows * d * 4 bytes
    assert {t: b for t, b in atomic["loads"].items() if t != "DQ"} == dkdv       # otherwise the K/V pass's loads
    assert measured.result[0].dtype == q.dtype


def test_count_io_restores_the_atomic_hook():
    from triton.runtime.interpreter import InterpreterBuilder
    before = getattr(InterpreterBuilder, "create_atomic_rmw", None)
    with pytest.raises(RuntimeError):
        count_io(lambda: (_ for _ in ()).throw(RuntimeError("inside")))
    assert getattr(InterpreterBuilder, "create_atomic_rmw", None) is before


@pytest.mark.parametrize("causal", [False, True])
def test_trace_sums_to_closed_form_and_l2_model_runs(causal):
    from flashsim.model.kernel_io import kernel_dram, kernel_trace
    args = ("flash_bwd", 97, 80, 32, 16, causal, "fp16", 1, 2)
    sim = kernel_io(*args, dq_mode="atomic")
    trace = kernel_trace(*args, dq_mode="atomic")
    assert [name for name, _ in trace] == [L.name for L in sim.launches]
    for (_, progs), L in zip(trace, sim.launches):
        assert sum(a.nbytes for p in progs for a in p if not a.is_write) == L.load_bytes
        assert sum(a.nbytes for p in progs for a in p if a.is_write) == L.store_bytes
    assert kernel_dram(*args, dq_mode="atomic")["total"].dram_read_bytes > 0


def test_kernel_io_dq_mode_errors():
    with pytest.raises(FlashsimError, match="dq_mode"):
        kernel_io("flash_fwd", 64, 16, 32, 32, dq_mode="atomic")
    with pytest.raises(FlashsimError, match="dq_mode"):
        kernel_io("flash_bwd", 64, 16, 32, 32, dq_mode="fast")


def test_docstring_chapter_and_traffic_comments():
    from flashsim.kernels import flash_bwd as mod
    assert "chapter 07" in mod.__doc__ and 'dq_mode="atomic"' in mod.__doc__
    lines = inspect.getsource(mod).splitlines()
    n_atomic = 0
    for i, line in enumerate(lines):
        if re.search(r"\btl\.(load|store|atomic_add)\(", line):
            n_atomic += "atomic_add" in line
            window = " ".join(lines[max(0, i - 2):i + 1])
            assert re.search(r"# (reads|writes) ", window), f"flash_bwd:{i + 1} lacks a traffic comment"
    assert n_atomic == 1


def test_attention_speed_bwd_dq_mode_both_and_atomic():
    import importlib.util
    import os
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    spec = importlib.util.spec_from_file_location("attention_speed", os.path.join(root, "benchmarks",
                                                                                  "attention_speed.py"))
    speed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(speed)
    row = [r for r in speed.make_grid(dtypes=("float16",), ns=(32,), ds=(16,), tokens=32, width=16)
           if r["mode"] == "bwd" and r["causal"]][0]
    impls = ("ours", "flash")

    def timer(fn):                     # stubbed: run once, fixed times
        fn()
        return 1.0

    both = speed.time_row(row, impls=impls, timer=timer, bwd_dq_mode="both")
    assert both["check"]["pass"] and both["check"]["pass_ours_atomic"], both["check"]
    assert set(both["ms"]) == {"ours", "flash", "ours_atomic"} and both["bwd_dq_mode"] == "both"
    assert both["ratio_atomic"]["ours"] == 1.0 and "ours_atomic" in speed.atomic_line(both)
    result = {"versions": {}, "rows": [both], "complete": True, "tflops_convention": "x"}
    assert "dq_mode=\"atomic\"" in speed.markdown(result, "x.json")
    assert len(speed.table([both]).splitlines()) == 3                 # the table itself is unchanged
    atomic = speed.time_row(row, impls=impls, timer=timer, bwd_dq_mode="atomic")
    assert set(atomic["ms"]) == {"ours", "flash"} and atomic["check"]["pass"]
    sep = speed.time_row(row, impls=impls, timer=timer)
    assert "bwd_dq_mode" not in sep and "ratio_atomic" not in sep
