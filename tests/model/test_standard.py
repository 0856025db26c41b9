"""Standard attention (chapter 02): Algorithm 0 and the eager op model, step mode == count mode == closed form."""
import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flashsim.model.attention.standard import (EAGER_PRESETS, NAIVE_OPS, EagerOps, build_program, count_standard,
                                          run_standard)
from flashsim.model.attention.reference import plain_attention, reference_attention, reference_forward_backward
from flashsim.errors import FlashsimError, MemoryBudgetError, SramCapacityError
from flashsim.model.attention.closed_forms.standard import eager_io, naive_io, standard_io
from flashsim.model.problem import make_problem

ALL_OPS = [EagerOps(a, b, c, name=f"ops{a}{b}{c}") for a in (False, True) for b in (False, True)
           for c in (False, True)]


def _inputs(heads, n, d, seed=0, backward=True):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((heads, n, d)).astype(np.float32) for _ in range(4 if backward else 3)]


def _closed(p, ops=None):
    return standard_io(p.algo, p.n, p.d, p.dtype, causal=p.causal, backward=p.backward,
                       dropout=p.dropout_p > 0, heads=p.heads, eager_ops=ops)


def _assert_three_agree(p, ops=None, seed=0):
    c = count_standard(p, ops)
    q, k, v, do = _inputs(p.heads, p.n, p.d, seed)
    r = run_standard(p, q, k, v, do if p.backward else None, eager_ops=ops)
    assert r.counters == c.counters  # every field: bytes by tensor, FLOPs, reuse, peak SRAM
    assert r.forward == c.forward
    if p.backward:
        assert r.backward == c.backward
        assert c.forward + c.backward == c.counters
    f = _closed(p, ops)
    assert (c.counters.hbm_read_bytes, c.counters.hbm_write_bytes, c.counters.flops) == \
        (f.hbm_read_bytes, f.hbm_write_bytes, f.flops)
    return r


def test_algorithm0_n1024_d64_fp16_exact_bytes():
    """The issue's check: (3Nd + 2N²)·2 read and (2N² + Nd)·2 written, exactly, in count and step mode."""
    n, d = 1024, 64
    p = make_problem("naive", n, d, dtype="fp16")
    c = count_standard(p).counters
    assert c.hbm_read_bytes == (3 * n * d + 2 * n * n) * 2
    assert c.hbm_write_bytes == (2 * n * n + n * d) * 2
    assert c.flops == 4 * n * n * d
    q, k, v = _inputs(1, n, d, backward=False)
    r = run_standard(p, q, k, v, record_events=False)
    assert r.counters == c


def test_algorithm0_per_tensor_breakdown_matches_paper_listing():
    n, d = 256, 32
    c = count_standard(make_problem("naive", n, d, dtype="fp16")).counters
    b = 2
    assert dict(c.read_bytes_by_tensor) == {"Q": n * d * b, "K": n * d * b, "S": n * n * b, "P": n * n * b,
                                            "V": n * d * b}
    assert dict(c.write_bytes_by_tensor) == {"S": n * n * b, "P": n * n * b, "O": n * d * b}


@pytest.mark.parametrize("n,d,causal,dtype,backward", [
    (n, d, c, dt, bw) for n, d, c, dt, bw in itertools.product([1, 33, 64], [1, 8], [False, True],
                                                               ["fp32", "fp16", "bf16"], [False, True])])
def test_naive_step_count_closed_grid(n, d, causal, dtype, backward):
    p = make_problem("naive", n, d, block_r=16, block_c=24, heads=2, dtype=dtype, causal=causal,
                     backward=backward)
    _assert_three_agree(p)


@pytest.mark.parametrize("ops", ALL_OPS + list(EAGER_PRESETS.values()), ids=lambda o: o.name)
@pytest.mark.parametrize("causal,dropout,backward,dtype", [
    (False, False, False, "fp16"), (True, True, True, "fp16"), (True, False, True, "bf16"),
    (False, True, True, "fp32"), (True, True, False, "fp32")])
def test_eager_step_count_closed_grid(ops, causal, dropout, backward, dtype):
    p = make_problem("eager", 37, 8, block_r=16, block_c=8, heads=2, dtype=dtype, causal=causal,
                     backward=backward, dropout_p=0.2 if dropout else 0.0)
    _assert_three_agree(p, ops)


@settings(max_examples=900, deadline=None, suppress_health_check=list(HealthCheck))
@given(algo=st.sampled_from(["naive", "eager"]), n=st.integers(1, 3000), d=st.integers(1, 256),
       block=st.integers(16, 128), causal=st.booleans(), backward=st.booleans(), dropout=st.booleans(),
       dtype=st.sampled_from(["fp32", "fp16", "bf16"]), heads=st.integers(1, 64),
       ops=st.sampled_from(ALL_OPS))
def test_count_mode_equals_closed_form_hypothesis(algo, n, d, block, causal, backward, dropout, dtype, heads, ops):
    dropout = dropout and algo == "eager"
    p = make_problem(algo, n, d, block_r=block, block_c=block, heads=heads, dtype=dtype, causal=causal,
                     backward=backward, dropout_p=0.1 if dropout else 0.0, sram_bytes=1 << 24)
    ops = ops if algo == "eager" else None
    c = count_standard(p, ops).counters
    f = _closed(p, ops)
    assert (c.hbm_read_bytes, c.hbm_write_bytes, c.flops) == (f.hbm_read_bytes, f.hbm_write_bytes, f.flops)
    if algo == "naive":
        assert dict(c.read_bytes_by_tensor) == f.read_bytes_by_tensor
        assert dict(c.write_bytes_by_tensor) == f.write_bytes_by_tensor


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(algo=st.sampled_from(["naive", "eager"]), n=st.integers(1, 24), d=st.integers(1, 8),
       br=st.integers(1, 30), bc=st.integers(1, 30), causal=st.booleans(), backward=st.booleans(),
       dropout=st.booleans(), dtype=st.sampled_from(["fp32", "fp16", "bf16"]), ops=st.sampled_from(ALL_OPS),
       seed=st.integers(0, 2**16))
def test_step_mode_equals_count_mode_hypothesis(algo, n, d, br, bc, causal, backward, dropout, dtype, ops, seed):
    """Ragged N, any blocks: identical counters, and outputs finite and close to float64."""
    dropout = dropout and algo == "eager"
    p = make_problem(algo, n, d, block_r=br, block_c=bc, dtype=dtype, causal=causal, backward=backward,
                     dropout_p=0.25 if dropout else 0.0)
    ops = ops if algo == "eager" else None
    r = _assert_three_agree(p, ops, seed)
    assert np.isfinite(r.out).all()
    if backward:
        assert all(np.isfinite(g).all() for g in r.grads)


def _one_head_errors(algo, dtype, ops=None, n=64, d=16, causal=True, seed=1, scale_scores=1.0):
    p = make_problem(algo, n, d, block_r=16, block_c=32, dtype=dtype, causal=causal, backward=True)
    q, k, v, do = _inputs(1, n, d, seed)
    q = q * scale_scores
    r = run_standard(p, q, k, v, do, eager_ops=ops)
    from flashsim.model.dtypes import round_to
    qr, kr, vr, dor = (round_to(x[0], dtype) for x in (q, k, v, do))
    ref_o, ref_g = reference_forward_backward(qr, kr, vr, dor, causal)
    pl_o, pl_g = plain_attention(qr, kr, vr, dor, causal, dtype=dtype)
    errs = [np.abs(a - b).max() / np.abs(b).max() for a, b in zip([r.out[0]] + [g[0] for g in r.grads],
                                                                  [ref_o, *ref_g])]
    plain = [np.abs(a - b).max() / np.abs(b).max() for a, b in zip([pl_o, *pl_g], [ref_o, *ref_g])]
    return r, errs, plain


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_dtype_rounding_is_emulated(dtype):
    """Stored tensors hold exactly what the dtype can represent, and the error is that dtype's, not fp32's."""
    r, errs, plain = _one_head_errors("naive", dtype)
    from flashsim.model.dtypes import UNIT_ROUNDOFF, round_to
    for name in ("S", "P", "O"):
        x = r.memory.hbm(name)
        assert np.array_equal(x[np.isfinite(x)], round_to(x, dtype)[np.isfinite(x)])
    assert UNIT_ROUNDOFF[dtype] / 8 < errs[0] < 50 * UNIT_ROUNDOFF[dtype]
    assert all(e <= 2 * pe + 1e-6 for e, pe in zip(errs, plain))


def test_fp32_is_exact_to_1e6():
    for algo, ops in (("naive", None), ("eager", "pytorch")):
        _, errs, _ = _one_head_errors(algo, "fp32", ops)
        assert max(errs) < 1e-6


@pytest.mark.parametrize("ops", ["pytorch", "megatron2020"])
def test_eager_fp16_error_at_most_twice_plain(ops):
    _, errs, plain = _one_head_errors("eager", "fp16", ops)
    assert all(e <= 2 * pe for e, pe in zip(errs, plain))


@pytest.mark.parametrize("algo,ops", [("naive", None), ("eager", "megatron2020")])
def test_extreme_scores_fp16_finite(algo, ops):
    """Scaled scores of ±1e4 in fp16 (S stored after the fused scale): outputs finite, and the softmax exact."""
    n, d = 32, 16
    rng = np.random.default_rng(3)
    q = np.zeros((1, n, d), np.float32)
    q[0, :, 0] = rng.choice([-1.0, 1.0], n) * 1e4 / 4  # τ·q·k = ±1e4 with k[:, 0] = ±4·... below
    k = np.zeros((1, n, d), np.float32)
    k[0, :, 0] = rng.choice([-1.0, 1.0], n) * 4 * np.sqrt(d)
    v = rng.standard_normal((1, n, d)).astype(np.float32)
    do = rng.standard_normal((1, n, d)).astype(np.float32)
    p = make_problem(algo, n, d, block_r=8, block_c=16, dtype="fp16", causal=True, backward=True)
    r = run_standard(p, q, k, v, do, eager_ops=ops)
    assert np.abs(r.memory.hbm("S")).max() == pytest.approx(1e4, rel=1e-3)
    assert np.isfinite(r.out).all() and all(np.isfinite(g).all() for g in r.grads)
    ref_o = reference_attention(q[0], k[0], v[0], True)
    assert np.abs(r.out[0] - ref_o).max() <= 4e-3 * np.abs(ref_o).max()


def test_eager_separate_scale_overflows_in_fp16_like_pytorch():
    """Chapter 02's lesson: with the scale as its own kernel, QKᵀ is stored *before* scaling and overflows fp16
    at |QKᵀ| > 65504 (which is why Megatron fuses the scale into baddbmm). The simulator shows that, in fp16 only."""
    n, d = 16, 16
    q = np.zeros((1, n, d), np.float32)
    k = np.zeros((1, n, d), np.float32)
    q[0, :, 0], k[0, :, 0] = 300.0, 300.0  # QKᵀ = 9e4 > 65504, scaled = 22500
    v = np.ones((1, n, d), np.float32)
    r16 = run_standard(make_problem("eager", n, d, dtype="fp16"), q, k, v, eager_ops="pytorch")
    assert np.isinf(r16.memory.hbm("S")).all() and not np.isfinite(r16.out).all()
    fused = run_standard(make_problem("eager", n, d, dtype="fp16"), q, k, v, eager_ops="megatron2020")
    assert np.isfinite(fused.out).all()
    r32 = run_standard(make_problem("eager", n, d, dtype="fp32"), q, k, v, eager_ops="pytorch")
    assert np.allclose(r32.out, 1.0)


def test_naive_is_eager_with_everything_fused():
    p_naive = make_problem("naive", 100, 16, heads=3, causal=True, backward=True)
    p_eager = make_problem("eager", 100, 16, heads=3, causal=True, backward=True)
    assert count_standard(p_naive).counters == count_standard(p_eager, NAIVE_OPS).counters


def test_eager_pytorch_program_op_list():
    prog = build_program(EAGER_PRESETS["pytorch"], "fp16", causal=True, dropout=True, backward=True)
    assert [op.out for op in prog.forward] == ["S", "S_scaled", "S_masked", "S_fp32", "P_fp32", "P", "P_drop", "O"]
    assert [op.out for op in prog.backward] == ["dP_drop", "dV", "dP", "dP_fp32", "dS_fp32", "dS_masked",
                                                "dS_scaled", "dS", "dQ", "dK"]
    assert prog.dtypes["S_fp32"] == "fp32" and prog.dtypes["drop_mask"] == "bool"
    fp32 = build_program(EAGER_PRESETS["pytorch"], "fp32", causal=False, dropout=False, backward=False)
    assert [op.out for op in fp32.forward] == ["S", "S_scaled", "P", "O"]  # .float() on fp32 is a no-op


def test_eager_closed_form_terms():
    n, d, u, nd = 128, 16, 128 * 128, 128 * 16
    base = naive_io(n, d, "fp16")
    io = eager_io(n, d, "fp16", fuse_scale=False, fuse_mask_softmax=True)
    assert io.hbm_read_bytes - base.hbm_read_bytes == 2 * u and io.hbm_write_bytes - base.hbm_write_bytes == 2 * u
    drop = eager_io(n, d, "fp16", fuse_scale=True, fuse_mask_softmax=True, dropout=True)
    assert drop.hbm_write_bytes - base.hbm_write_bytes == 2 * u + u  # P_drop + 1-byte keep mask
    bwd = naive_io(n, d, "fp16", backward=True)
    assert bwd.hbm_read_bytes - base.hbm_read_bytes == (5 * u + 5 * nd) * 2  # Algorithm 3's reads
    assert bwd.hbm_write_bytes - base.hbm_write_bytes == (2 * u + 3 * nd) * 2


def test_events_step_by_step_and_bounded():
    p = make_problem("naive", 96, 16, block_r=32, block_c=32, backward=True)
    r = run_standard(p, *_inputs(1, 96, 16))
    ev = r.memory.events
    assert [e.index for e in ev] == list(range(len(ev)))
    assert {e.kind for e in ev} == {"load", "store", "compute", "free"}
    assert sum(e.nbytes for e in ev if e.kind == "load") == r.counters.hbm_read_bytes
    assert sum(e.nbytes for e in ev if e.kind == "store") == r.counters.hbm_write_bytes
    assert max(e.sram_in_use_bytes for e in ev) == r.counters.sram_peak_bytes
    big = [e for e in ev if e.stats for v in e.stats.values() if np.size(v) > 32]
    assert not big  # events carry per-row-block stats only, never an N×N array
    softmax = [e for e in ev if e.stats and "l" in e.stats]
    assert softmax and all(e.stats["l"].shape == (32,) for e in softmax)


def test_bad_input_errors():
    with pytest.raises(FlashsimError, match="no dropout"):
        count_standard(make_problem("naive", 64, 16, dropout_p=0.1))
    with pytest.raises(SramCapacityError, match="block_r = block_c ≤"):
        count_standard(make_problem("naive", 1024, 64, block_r=512, block_c=512, device="t4"))
    with pytest.raises(FlashsimError, match="unknown eager_ops"):
        count_standard(make_problem("eager", 64, 16), "tensorflow")
    with pytest.raises(MemoryBudgetError, match="count mode"):
        p = make_problem("naive", 16384, 64)  # three 16384² fp32 holders: over the 2 GiB default budget
        run_standard(p, np.zeros((16384, 64)), np.zeros((16384, 64)), np.zeros((16384, 64)))
    with pytest.raises(MemoryBudgetError):
        run_standard(make_problem("naive", 256, 16), *_inputs(1, 256, 16, backward=False), host_budget_bytes=10**5)
    with pytest.raises(FlashsimError, match="expected"):
        run_standard(make_problem("naive", 8, 4), np.zeros((8, 5)), np.zeros((8, 4)), np.zeros((8, 4)))


def test_default_blocks_fit_every_preset():
    for device in ("a100", "h100", "h200", "rtx4090", "t4"):
        for d in (32, 64, 128, 256):
            c = count_standard(make_problem("eager", 4096, d, device=device, backward=True, causal=True,
                                            dropout_p=0.1))
            assert c.counters.sram_peak_bytes <= make_problem("eager", 8, 8, device=device).sram_bytes
            assert c.block_r == c.block_c and c.block_r & (c.block_r - 1) == 0
