"""flashsim.traffic / flashsim.simulate: the public API (chapters 02, 05, 09)."""
import json
from dataclasses import fields

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import flashsim
from flashsim.model.attention.l2_traces import dram_bytes
from flashsim.model.attention.reference import plain_attention, reference_attention
from flashsim.model.simulator import Traffic, simulate, tolerance, traffic
from flashsim.errors import FlashsimError, MemoryBudgetError, SramCapacityError

ALGOS = ["naive", "eager", "flash1", "flash2"]


def test_public_names():
    for name in ("traffic", "simulate", "get_device", "make_problem", "FlashsimError", "MemoryBudgetError",
                 "SramCapacityError"):
        assert hasattr(flashsim, name)


@pytest.mark.parametrize("algo", ALGOS)
def test_traffic_fields_and_json(algo):
    t = traffic(algo, 512, 64, heads=4, causal=True, backward=True)
    assert isinstance(t, Traffic)
    assert t.hbm_bytes == t.hbm_read_bytes + t.hbm_write_bytes
    assert t.flops > 0 and t.sram_peak_bytes > 0 and t.time_s > 0
    assert t.bound in ("memory", "compute")
    assert t.arithmetic_intensity == pytest.approx(t.flops / t.hbm_bytes)
    assert sum(t.read_bytes_by_tensor.values()) == t.hbm_read_bytes
    assert sum(t.write_bytes_by_tensor.values()) == t.hbm_write_bytes
    fw, bw = t.forward_part, t.backward_part
    assert fw["hbm_read_bytes"] + bw["hbm_read_bytes"] == t.hbm_read_bytes
    assert fw["flops"] + bw["flops"] == t.flops
    d = t.as_dict()
    assert list(d) == [f.name for f in fields(Traffic)]
    assert json.loads(json.dumps(d)) == d
    assert t.dram_bytes is None and not t.l2


def test_traffic_forward_only_has_no_parts():
    t = traffic("flash2", 256, 32)
    assert t.forward_part is None and t.backward_part is None


def test_algorithm0_through_the_api():
    n, d = 1024, 64
    t = traffic("naive", n, d, dtype="fp16")
    assert t.hbm_read_bytes == (3 * n * d + 2 * n * n) * 2
    assert t.hbm_write_bytes == (2 * n * n + n * d) * 2
    assert t.bound == "memory"


def test_heads_multiply_bytes_not_sram():
    one, many = traffic("flash2", 300, 32), traffic("flash2", 300, 32, heads=7)
    assert many.hbm_bytes == 7 * one.hbm_bytes and many.flops == 7 * one.flops
    assert many.sram_peak_bytes == one.sram_peak_bytes


def test_flash_io_is_far_below_naive():
    """flash2 reads K, V once per row block: ≈ 4N²d/Br bytes against naive's ≈ 4N², so the ratio is ≈ d/Br."""
    naive, flash = traffic("naive", 4096, 64), traffic("flash2", 4096, 64, block_r=128, block_c=64)
    assert flash.hbm_bytes * 1.9 < naive.hbm_bytes and flash.flops == naive.flops


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16"])
def test_simulate_counters_equal_traffic_and_error_within_tolerance(algo, dtype):
    kw = dict(heads=2, dtype=dtype, causal=True, backward=True, block_r=16, block_c=32)
    sim = simulate(algo, 70, 16, seed=3, **kw)
    t = traffic(algo, 70, 16, **kw)
    assert sim.traffic == t
    assert sim.counters.hbm_read_bytes == t.hbm_read_bytes and sim.counters.flops == t.flops
    assert sim.out.shape == (2, 70, 16) and len(sim.grads) == 3
    assert sim.ok, sim.errors_by_output
    if dtype == "fp32":
        assert sim.rel_error < 1e-6
    else:  # at most twice a plain implementation in the same dtype, for the output and each gradient
        for e in sim.errors_by_output.values():
            assert e["rel_error"] <= 2 * e["plain_rel_error"]
            assert e["rel_error"] > 0  # rounding is emulated: not float64 in disguise
    assert len(sim.events) > 0 and sim.events[0].kind == "load"
    d = sim.as_dict()
    assert json.loads(json.dumps(d)) == d and d["ok"] is True


def test_simulate_eager_with_dropout_uses_the_same_mask_as_the_reference():
    sim = simulate("eager", 64, 16, dtype="fp32", causal=True, backward=True, dropout_p=0.3, seed=5)
    assert sim.rel_error < 1e-6
    assert sim.traffic.write_bytes_by_tensor["drop_mask"] == 64 * 64


def test_simulate_flash_dropout_note():
    sim = simulate("flash2", 32, 8, dropout_p=0.1)
    assert "without dropout" in sim.note and sim.ok


def test_simulate_inputs_are_normal_and_never_zero():
    sim = simulate("naive", 64, 16, dtype="fp32", seed=11)
    assert np.abs(sim.memory.hbm("Q")).min() > 0
    scores = sim.memory.hbm("S")
    assert 0.5 < scores.std() < 2.0  # τ·QKᵀ is O(1)


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(algo=st.sampled_from(ALGOS), n=st.integers(1, 40), d=st.integers(1, 12), br=st.integers(1, 48),
       bc=st.integers(1, 48), causal=st.booleans(), backward=st.booleans(),
       dtype=st.sampled_from(["fp32", "fp16", "bf16"]), seed=st.integers(0, 1000))
def test_simulate_hypothesis_finite_and_consistent(algo, n, d, br, bc, causal, backward, dtype, seed):
    kw = dict(block_r=br, block_c=bc, dtype=dtype, causal=causal, backward=backward)
    sim = simulate(algo, n, d, seed=seed, record_events=False, **kw)
    assert sim.traffic == traffic(algo, n, d, **kw)
    assert np.isfinite(sim.out).all()
    if backward:
        assert all(np.isfinite(g).all() for g in sim.grads)
    # O is a convex combination of V's rows: measure its error against max|V| (well-conditioned at any size)
    from flashsim.model.dtypes import UNIT_ROUNDOFF, round_to
    rng = np.random.default_rng(seed)
    q, k, v = (round_to(rng.standard_normal((1, n, d), dtype=np.float32)[0], dtype) for _ in range(3))
    ref = reference_attention(q, k, v, causal)
    assert np.abs(sim.out[0] - ref).max() <= 32 * UNIT_ROUNDOFF[dtype] * np.abs(v).max()


@pytest.mark.parametrize("algo", ALGOS)
def test_extreme_scores_fp16_finite_where_reference_finite(algo):
    """Scaled scores ±1e4 in fp16: outputs stay finite where the float64 reference is finite."""
    n, d = 48, 16
    rng = np.random.default_rng(0)
    q = np.zeros((1, n, d), np.float32)
    k = np.zeros((1, n, d), np.float32)
    q[0, :, 0] = rng.choice([-1.0, 1.0], n) * 2500.0
    k[0, :, 0] = rng.choice([-1.0, 1.0], n) * 16.0  # τ·q·k = ±2500·16/4 = ±1e4
    v = rng.standard_normal((1, n, d)).astype(np.float32)
    ops = "megatron2020" if algo == "eager" else None
    sim = simulate(algo, n, d, dtype="fp16", causal=True, inputs=(q, k, v), block_r=16, block_c=16,
                   eager_ops=ops)
    ref = reference_attention(q[0], k[0], v[0], True)
    assert np.isfinite(ref).all() and np.isfinite(sim.out).all()
    assert sim.ok


def test_tolerance_rule():
    assert tolerance("fp32", 1e-8) == 1e-6
    assert tolerance("fp32", 1e-5) == 2e-5  # an ill-conditioned output: the plain fp32 error's slack
    assert tolerance("fp16", 1e-3) == 2e-3
    assert tolerance("bf16", 0.0) == 1e-6


def test_plain_attention_chunked_equals_unchunked():
    rng = np.random.default_rng(1)
    q, k, v, do = (rng.standard_normal((50, 8)) for _ in range(4))
    a = plain_attention(q, k, v, do, True, dtype="fp16", row_chunk=7)
    b = plain_attention(q, k, v, do, True, dtype="fp16", row_chunk=50)
    assert np.allclose(a[0], b[0]) and all(np.allclose(x, y) for x, y in zip(a[1], b[1]))


# --- L2 ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("causal", [False, True])
def test_l2_requested_bytes_equal_counters(algo, causal):
    from flashsim.model.simulator import _count
    from flashsim.model.problem import make_problem
    p = make_problem(algo, 100, 16, 32, 48, heads=3, causal=causal, backward=True,
                     dropout_p=0.1 if algo == "eager" else 0.0)
    res = _count(p)
    l2 = dram_bytes(p, res)
    assert l2.requested_read_bytes == res.counters.hbm_read_bytes
    assert l2.requested_write_bytes == res.counters.hbm_write_bytes
    assert l2.dram_read_bytes <= l2.requested_read_bytes


def test_traffic_l2_fields():
    t = traffic("flash2", 2048, 64, heads=8, l2=True, backward=True)
    assert t.l2 and t.dram_bytes == t.dram_read_bytes + t.dram_write_bytes
    assert 0 < t.dram_read_bytes < t.hbm_read_bytes  # K/V re-reads across row blocks hit in L2
    assert t.memory_time_s == pytest.approx(t.dram_bytes / flashsim.get_device("h200").hbm_bandwidth_bytes_per_s)
    # whole GPU worth of heads: sampled heads, scaled
    big = traffic("flash2", 1024, 64, batch=64, heads=16, l2=True)
    assert big.dram_bytes < big.hbm_bytes


# --- bad input: a clear FlashsimError naming the fix ---------------------------------------------------------

@pytest.mark.parametrize("kwargs,match", [
    (dict(n=0), "n=0 must be a positive integer"),
    (dict(n=-5), "positive integer"),
    (dict(d=0), "d=0 must be a positive integer"),
    (dict(block_r=0), "block_r=0 must be a positive integer"),
    (dict(block_c=-1), "block_c=-1 must be a positive integer"),
    (dict(heads=0), "heads=0"),
    (dict(dtype="fp8"), "unknown dtype 'fp8': use one of"),
    (dict(device="v100"), "unknown device 'v100': use one of"),
    (dict(algo="flash3"), "unknown algo 'flash3': use one of"),
    (dict(sram_bytes=0), "sram_bytes=0"),
    (dict(dropout_p=1.5), "dropout_p"),
    (dict(n=2.5), "n=2.5 must be a positive integer"),
])
@pytest.mark.parametrize("fn", [traffic, simulate])
def test_bad_input_clear_errors(fn, kwargs, match):
    args = dict(algo="flash2", n=64, d=16)
    args.update(kwargs)
    with pytest.raises(FlashsimError, match=match):
        fn(**args)


@pytest.mark.parametrize("algo,kw", [("flash2", dict(block_r=4096, block_c=4096)),
                                     ("flash1", dict(block_c=100000)),
                                     ("naive", dict(block_r=1024, block_c=1024)),
                                     ("eager", dict(block_r=512, block_c=512))])
def test_block_larger_than_sram(algo, kw):
    for fn in (traffic, simulate):
        with pytest.raises(SramCapacityError) as e:
            fn(algo, 4096, 64, device="a100", **kw)
        msg = str(e.value)
        assert "SRAM" in msg and "KiB" in msg and "≤" in msg  # needed, available, the block that would fit


def test_sram_bytes_too_small_for_any_block():
    with pytest.raises(FlashsimError, match="sram_bytes|SRAM"):
        traffic("naive", 64, 256, sram_bytes=64)


@pytest.mark.parametrize("algo", ALGOS)
def test_step_mode_over_budget(algo):
    with pytest.raises(MemoryBudgetError, match="count mode"):
        simulate(algo, 4096, 64, heads=64, host_budget_bytes=256 * 1024**2)
    with pytest.raises(MemoryBudgetError, match="flashsim.traffic"):
        simulate(algo, 65536, 128, heads=16)


def test_eager_ops_only_for_eager():
    with pytest.raises(FlashsimError, match="eager_ops only applies"):
        traffic("flash2", 64, 16, eager_ops="megatron2020")
    assert traffic("eager", 64, 16, eager_ops="megatron2020").eager_ops == "megatron2020"
    assert traffic("eager", 64, 16).eager_ops == "pytorch"


def test_import_is_light():
    import subprocess
    import sys
    code = ("import sys, flashsim; flashsim.traffic('flash2', 64, 16); "
            "print([m for m in ('torch', 'triton', 'ipywidgets', 'matplotlib') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@settings(max_examples=700, deadline=None, suppress_health_check=list(HealthCheck))
@given(algo=st.sampled_from(ALGOS), n=st.integers(1, 20000), d=st.integers(1, 256),
       br=st.one_of(st.none(), st.integers(1, 256)), bc=st.one_of(st.none(), st.integers(1, 256)),
       heads=st.integers(1, 2048), causal=st.booleans(), backward=st.booleans(),
       dtype=st.sampled_from(["fp32", "fp16", "bf16"]), device=st.sampled_from(["a100", "h100", "h200", "t4"]))
def test_traffic_hypothesis_invariants(algo, n, d, br, bc, heads, causal, backward, dtype, device):
    """Any valid problem: either a clear SRAM error or consistent counters (parts add up, heads scale bytes,
    JSON round-trips, the roofline time is the max of its two parts)."""
    kw = dict(block_r=br, block_c=bc, dtype=dtype, causal=causal, backward=backward, device=device,
              sram_bytes=1 << 22)
    try:
        t = traffic(algo, n, d, heads=heads, **kw)
    except SramCapacityError as e:
        assert "≤" in str(e) or "sram_bytes" in str(e)
        return
    one = traffic(algo, n, d, heads=1, **kw)
    assert t.hbm_read_bytes == heads * one.hbm_read_bytes and t.flops == heads * one.flops
    assert t.sram_peak_bytes == one.sram_peak_bytes <= 1 << 22
    assert t.time_s == max(t.memory_time_s, t.compute_time_s) > 0
    if backward:
        assert t.forward_part["hbm_bytes"] + t.backward_part["hbm_bytes"] == t.hbm_bytes
    assert Traffic(**t.as_dict()) == t


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(algo=st.sampled_from(ALGOS), n=st.integers(2, 32), d=st.integers(1, 8), block=st.integers(1, 16),
       causal=st.booleans(), dtype=st.sampled_from(["fp16", "bf16"]), magnitude=st.sampled_from([1e2, 1e3, 1e4]),
       seed=st.integers(0, 1000))
def test_extreme_scores_hypothesis(algo, n, d, block, causal, dtype, magnitude, seed):
    """Scaled scores up to ±1e4: outputs finite wherever the float64 reference is finite."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((1, n, d)).astype(np.float32)
    k = rng.standard_normal((1, n, d)).astype(np.float32)
    q *= magnitude / max(1e-3, float(np.abs(q[0] @ k[0].T).max()) / np.sqrt(d))  # max |τ·QKᵀ| ≈ magnitude
    v = rng.standard_normal((1, n, d)).astype(np.float32)
    ops = "megatron2020" if algo == "eager" else None  # separate-scale eager overflows before scaling, like PyTorch
    sim = simulate(algo, n, d, block_r=block, block_c=block, dtype=dtype, causal=causal, inputs=(q, k, v),
                   eager_ops=ops, record_events=False)
    from flashsim.model.dtypes import round_to
    ref = reference_attention(*(round_to(x[0], dtype) for x in (q, k, v)), causal)
    finite = np.isfinite(ref)
    assert np.isfinite(sim.out[0][finite]).all()
