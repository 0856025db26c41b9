"""simulate's verdict never lies (issue 13, items 1, 6 and 13).

- ``ok`` is never True when an output is non-finite where the float64 reference is finite, when the reference
  itself is not finite (NaN/inf inputs: nothing to compare), or when the error is not finite.
- Finite fp32 inputs that overflow fp16/bf16 storage warn (FlashsimWarning) and the verdict is not ok.
- NaN or inf in the inputs warns.
- ``as_dict()`` (what ``--json`` prints) is strict JSON: a non-finite number becomes null and its name is listed
  under ``non_finite_fields``.
- ``simulate --check``'s tolerance accounts for the statistics dtype and the eager model's extra roundings: every
  valid configuration on the seeded normal inputs passes its own check (the four reproducers of item 6 and a
  hypothesis sweep).
"""
import json
import math
import warnings

import numpy as np
import pytest
from hypothesis import example, given, strategies as st

import flashsim
from flashsim.model.attention.reference import plain_attention, reference_forward_backward, softmax_scale
from flashsim.model.attention.standard import NAIVE_OPS
from flashsim.model.dtypes import UNIT_ROUNDOFF, round_to
from flashsim.model.problem import make_problem
from flashsim.model.simulator import (ROUNDING_LAMBDA, FlashsimWarning, flash_rounding_bounds,
                                      standard_rounding_bounds)
from flashsim.errors import FlashsimError

Q = np.random.default_rng(0).standard_normal((1, 64, 16)).astype(np.float32)


def _strict(obj) -> dict:
    text = json.dumps(obj, allow_nan=False)  # raises on NaN / Infinity
    return json.loads(text)


def _verdict_is_honest(sim):
    """The verdict rule: ok implies finite outputs, finite errors, errors within the tolerance."""
    if not sim.ok:
        return
    outs = [sim.out] + (list(sim.grads) if sim.grads is not None else [])
    assert all(np.isfinite(o).all() for o in outs)
    assert math.isfinite(sim.rel_error) and math.isfinite(sim.tolerance)
    for e in sim.errors_by_output.values():  # each output within its own tolerance
        assert e["ok"] and math.isfinite(e["rel_error"]) and e["rel_error"] <= e["tolerance"]


def test_eager_fp16_overflow_is_not_ok():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sim = flashsim.simulate("eager", 64, 16, dtype="fp16", inputs=(Q * 300, Q * 300, Q))
    assert not sim.ok
    _verdict_is_honest(sim)
    d = _strict(sim.as_dict())
    assert d["ok"] is False


def test_inputs_overflowing_fp16_storage_warn_and_are_not_ok():
    with pytest.warns(FlashsimWarning, match="overflow"):
        sim = flashsim.simulate("flash2", 64, 16, dtype="fp16", inputs=(Q * 1e5, Q, Q))
    assert not sim.ok


def test_bf16_storage_overflow_warns_too():
    q = Q.copy()
    q[0, 0, 0] = 3.4e38  # finite in fp32 (max 3.4028e38), rounds to inf in bf16 (max 3.3895e38)
    with pytest.warns(FlashsimWarning, match="overflow"):
        sim = flashsim.simulate("flash2", 64, 16, dtype="bf16", inputs=(q, Q, Q))
    assert not sim.ok


def test_nan_inputs_warn_and_are_not_ok():
    nan_q = np.full((1, 64, 16), np.nan, np.float32)
    with pytest.warns(FlashsimWarning, match="NaN"):
        sim = flashsim.simulate("flash2", 64, 16, dtype="fp32", inputs=(nan_q, Q, Q))
    assert not sim.ok
    _strict(sim.as_dict())


def test_inf_input_warns():
    k = Q.copy()
    k[0, 3, 2] = np.inf
    with pytest.warns(FlashsimWarning, match="inf"):
        sim = flashsim.simulate("flash1", 64, 16, dtype="fp32", inputs=(Q, k, Q))
    assert not sim.ok


def test_json_non_finite_becomes_null_with_a_flag():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sim = flashsim.simulate("eager", 64, 16, dtype="fp16", inputs=(Q * 300, Q * 300, Q))
    d = _strict(sim.as_dict())
    flagged = d.get("non_finite_fields", [])
    for name in ("rel_error", "max_abs_error", "plain_rel_error", "tolerance"):
        if not math.isfinite(getattr(sim, name)):
            assert d[name] is None and name in flagged


def test_finite_run_has_no_flag():
    d = _strict(flashsim.simulate("flash2", 64, 16, dtype="fp32").as_dict())
    assert "non_finite_fields" not in d or d["non_finite_fields"] == []


@st.composite
def hostile_inputs(draw):
    n, d = draw(st.integers(1, 24)), draw(st.integers(1, 8))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    arrays = [rng.standard_normal((1, n, d)).astype(np.float32) * np.float32(draw(st.sampled_from(
        [1.0, 30.0, 300.0, 1e4, 1e5, 1e20]))) for _ in range(3)]
    for a in arrays:
        if draw(st.integers(0, 3)) == 0:
            a[0, draw(st.integers(0, n - 1)), draw(st.integers(0, d - 1))] = draw(st.sampled_from(
                [np.nan, np.inf, -np.inf]))
    return n, d, arrays


@given(algo=st.sampled_from(["naive", "eager", "flash1", "flash2"]), case=hostile_inputs(),
       dtype=st.sampled_from(["fp32", "fp16", "bf16"]), causal=st.booleans(), backward=st.booleans())
def test_verdict_never_ok_on_non_finite(algo, case, dtype, causal, backward):
    n, d, arrays = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sim = flashsim.simulate(algo, n, d, dtype=dtype, causal=causal, backward=backward, inputs=arrays,
                                record_events=False)
    _verdict_is_honest(sim)
    _strict(sim.as_dict())


# --- item 6: the tolerance of simulate --check -------------------------------------------------------------------

@pytest.mark.parametrize("kw", [
    dict(algo="flash1", n=256, d=64, dtype="fp32", stats_dtype="fp16"),
    dict(algo="flash2", n=256, d=64, dtype="fp32", stats_dtype="bf16", backward=True),
    dict(algo="flash2", n=2, d=16, dtype="fp32", causal=True, backward=True),
    dict(algo="eager", n=1228, d=59, dtype="bf16", seed=19756388),
])
def test_issue_reproducers_pass_their_own_check(kw):
    kw = dict(kw)
    algo, n, d = kw.pop("algo"), kw.pop("n"), kw.pop("d")
    sim = flashsim.simulate(algo, n, d, record_events=False, **kw)
    assert sim.ok, sim.errors_by_output


def test_tolerance_is_not_toothless():
    """A wrong answer still fails: the tolerance stays within a small multiple of the plain error."""
    sim = flashsim.simulate("flash2", 256, 64, dtype="fp32", stats_dtype="bf16", backward=True, record_events=False)
    for name, e in sim.errors_by_output.items():
        assert e["tolerance"] < 0.1, (name, e)
    sim = flashsim.simulate("flash2", 128, 32, dtype="fp16", record_events=False)
    assert sim.tolerance < 0.01


@given(algo=st.sampled_from(["naive", "eager", "flash1", "flash2"]), n=st.integers(1, 96), d=st.integers(1, 40),
       dtype=st.sampled_from(["fp32", "fp16", "bf16"]), stats=st.sampled_from([None, "fp32", "fp16", "bf16"]),
       causal=st.booleans(), backward=st.booleans(), seed=st.integers(0, 2**31 - 1),
       blocks=st.one_of(st.none(), st.tuples(st.integers(1, 64), st.integers(1, 64))))
@example(algo="flash1", n=10, d=1, dtype="fp16", stats=None, causal=True, backward=True, seed=17842, blocks=None)
def test_valid_configurations_pass_their_own_check(algo, n, d, dtype, stats, causal, backward, seed, blocks):
    kw = {}
    if blocks and algo.startswith("flash"):
        kw = dict(block_r=blocks[0], block_c=blocks[1])
    try:
        sim = flashsim.simulate(algo, n, d, dtype=dtype, stats_dtype=stats, causal=causal, backward=backward,
                                seed=seed, record_events=False, **kw)
    except FlashsimError:
        return  # e.g. stats_dtype on an algorithm without statistics, or blocks that do not fit
    assert sim.ok, (sim.errors_by_output, sim.tolerance)


# --- the deep profile's counterexample: flash1, N=10, d=1, fp16, causal, backward ---------------------------------

COUNTEREXAMPLE = dict(n=10, d=1, dtype="fp16", causal=True, backward=True, seed=17842)


def _counterexample_arrays():
    """The rounded (q, k, v, dO) simulate draws for COUNTEREXAMPLE (one head), each (N, d)."""
    rng = np.random.default_rng(COUNTEREXAMPLE["seed"])
    n, d = COUNTEREXAMPLE["n"], COUNTEREXAMPLE["d"]
    return [round_to(rng.standard_normal((1, n, d), dtype=np.float32)[0], "fp16") for _ in range(4)]


def test_counterexample_beats_twice_the_plain_error_and_passes():
    """dQ's error is more than twice the plain implementation's (the plain roundings cancel at that row), so the
    yardstick alone failed valid output; the D = rowsum(dO∘O) bound covers it and the verdict is ok."""
    sim = flashsim.simulate("flash1", record_events=False, **COUNTEREXAMPLE)
    dq = sim.errors_by_output["dq"]
    assert dq["rel_error"] > 2 * dq["plain_rel_error"]
    assert sim.ok, sim.errors_by_output
    assert all(e["tolerance"] < 0.01 for e in sim.errors_by_output.values()), sim.errors_by_output


def test_rounding_bounds_cover_the_counterexample_elementwise():
    """|sim − reference| ≤ the plain error's max + flash_rounding_bounds, element by element, for dQ and dK."""
    q, k, v, do = _counterexample_arrays()
    sim = flashsim.simulate("flash1", record_events=False, **COUNTEREXAMPLE)
    ref_o, ref_g = reference_forward_backward(q, k, v, do, True)
    _, plain_g = plain_attention(q, k, v, do, True, dtype="fp16", delta="output")
    problem = make_problem("flash1", 10, 1, dtype="fp16", causal=True, backward=True)
    bounds = flash_rounding_bounds(problem, q, k, v, do, ref_o)
    for name, got, want, plain in zip(("dq", "dk"), sim.grads, ref_g, plain_g):
        err = np.abs(got[0] - want)
        assert (err <= np.abs(plain - want).max() + bounds[name]).all(), name


def test_one_kv_block_leaves_flash1_only_its_own_store_of_o():
    """With one K/V block flash1 stores O once: its bound is (u + u_s)·|O|, no re-read term."""
    q, k, v, do = _counterexample_arrays()
    ref_o, _ = reference_forward_backward(q, k, v, do, True)
    problem = make_problem("flash1", 10, 1, block_c=16, dtype="fp16", causal=True, backward=True)
    bounds = flash_rounding_bounds(problem, q, k, v, do, ref_o)
    u = UNIT_ROUNDOFF["fp16"] + UNIT_ROUNDOFF["fp32"]
    np.testing.assert_allclose(bounds["out"], u * np.abs(ref_o), rtol=1e-9)
    many = flash_rounding_bounds(make_problem("flash1", 10, 1, block_c=1, dtype="fp16", causal=True,
                                              backward=True), q, k, v, do, ref_o)
    assert (many["out"] >= bounds["out"]).all() and many["out"].max() > 2 * bounds["out"].max()


def test_standard_bound_equals_the_monte_carlo_spread():
    """standard_rounding_bounds' per-site sum Σ (J·e)² is the exact first-order variance: perturbing S, P, dP and
    dS by independent uniform roundings (3000 draws, Algorithm 0) gives sqrt(3·variance) equal to the bound at
    λ = 1 less the stores of the outputs, element by element within the sampling noise."""
    rng = np.random.default_rng(1)
    n, d, u = 12, 3, UNIT_ROUNDOFF["fp16"]
    tau = softmax_scale(d)
    q, k, v, do = (rng.standard_normal((n, d)) for _ in range(4))
    problem = make_problem("naive", n, d, dtype="fp16", causal=True, backward=True)
    bounds = standard_rounding_bounds(problem, NAIVE_OPS, q, k, v, do)
    future = np.triu(np.ones((n, n), bool), 1)

    def run(xi):  # xi: (4, N, N) relative roundings of S, P, dP, dS in units of u
        s = np.where(future, -np.inf, (q @ k.T) * tau * (1 + u * xi[0]))
        p = np.exp(s - s.max(1, keepdims=True))
        p = p / p.sum(1, keepdims=True) * (1 + u * xi[1])
        dp = (do @ v.T) * (1 + u * xi[2])
        ds = p * (dp - (p * dp).sum(1, keepdims=True)) * (1 + u * xi[3])
        return p @ v, tau * ds @ k, tau * ds.T @ q, p.T @ do

    base = run(np.zeros((4, n, n)))
    draws = [run(rng.uniform(-1, 1, (4, n, n))) for _ in range(3000)]
    for i, name in enumerate(("out", "dq", "dk", "dv")):
        spread = np.sqrt(3 * np.array([x[i] - base[i] for x in draws]).var(axis=0))
        model = (bounds[name] - u * np.abs(base[i])) / ROUNDING_LAMBDA  # the λ = 1 part (fp32 terms ~1e-7)
        np.testing.assert_allclose(spread, model, rtol=0.1, atol=1e-9, err_msg=name)


@pytest.mark.parametrize("kw", [
    dict(algo="flash1", block_r=1, block_c=1),  # the most K/V blocks: the largest O bound
    dict(algo="flash1", block_r=4, block_c=3),
    dict(algo="flash2", block_r=1, block_c=1),
    dict(algo="eager"),  # S and dS rounded twice (the unfused scale)
    dict(algo="naive"),
])
def test_rounding_bounds_keep_the_check_sharp(kw):
    """The bounds stay a few fp16 roundings of the data: even with the most blocks every tolerance is under 2%,
    so an output 5% off still fails."""
    sim = flashsim.simulate(n=96, d=8, dtype="fp16", causal=True, backward=True, record_events=False, **kw)
    assert sim.ok, sim.errors_by_output
    for name, e in sim.errors_by_output.items():
        assert e["tolerance"] < 0.02, (name, e)
