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
from hypothesis import given, strategies as st

import flashsim
from flashsim.model.simulator import FlashsimWarning
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
