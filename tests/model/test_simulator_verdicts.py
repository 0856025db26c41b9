"""simulate(...).ok means what it says (issue 26): it holds only when the check could have failed. The tolerance is
capped at MAX_REL_TOLERANCE of each output's own scale, and a check that cannot resolve the error says so; torch
tensors are converted; eager_ops is refused where it has no meaning."""
import warnings

import numpy as np
import pytest

import flashsim
from flashsim.errors import FlashsimError
from flashsim.model.simulator import MAX_REL_TOLERANCE


def _arrays(n, d, count, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((n, d)).astype(np.float32) for _ in range(count)]


def test_reproducer_flash2_fp32_backward_with_huge_scores_is_not_ok():
    """Issue 26: ok=True with rel_error 2e12 (dq's true values ~6e-17, tolerance 2.4e13). Now: not ok, and why."""
    q, k, v, do = _arrays(97, 64, 4)
    sim = flashsim.simulate("flash2", 97, 64, block_r=32, block_c=16, dtype="fp32", backward=True,
                            inputs=(q * 100, k * 100, v, do), record_events=False)
    assert not sim.ok
    assert sim.tolerance <= MAX_REL_TOLERANCE
    assert "cannot be told from rounding" in sim.note and "dq" in sim.note
    assert sim.errors_by_output["dq"]["resolved"] is False and not sim.errors_by_output["dq"]["ok"]
    assert sim.errors_by_output["out"]["resolved"] is True and sim.errors_by_output["out"]["ok"]


def test_reproducer_naive_fp16_with_large_scores_is_not_ok_at_a_29_percent_error():
    """Issue 26: naive fp16 with q and k ~ N(0, 30²) was ok at a 29 % error against a tolerance of 1.56."""
    q, k, v = _arrays(97, 128, 3, seed=2)   # rel error ~0.39 here
    sim = flashsim.simulate("naive", 97, 128, dtype="fp16", inputs=(q * 30, k * 30, v), record_events=False)
    assert not sim.ok and sim.tolerance <= MAX_REL_TOLERANCE
    assert sim.rel_error > MAX_REL_TOLERANCE and "cannot be told from rounding" in sim.note


@pytest.mark.parametrize("algo", ["naive", "flash2"])
def test_well_conditioned_runs_stay_ok_and_resolved(algo):
    sim = flashsim.simulate(algo, 64, 16, dtype="fp16", backward=True, record_events=False)
    assert sim.ok and all(e["resolved"] for e in sim.errors_by_output.values())


def test_an_output_wrong_by_a_fraction_of_its_size_fails_everywhere():
    """The cap is what makes the README's sentence true: any tolerance is at most 5 % of the output's scale."""
    q, k, v = _arrays(64, 16, 3, seed=2)
    for scale in (1, 10, 30, 100):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sim = flashsim.simulate("naive", 64, 16, dtype="fp16", inputs=(q * scale, k * scale, v),
                                    record_events=False)
        assert all(e["tolerance"] <= MAX_REL_TOLERANCE for e in sim.errors_by_output.values())
        assert sim.ok == all(e["rel_error"] <= e["tolerance"] for e in sim.errors_by_output.values())
        if not all(e["resolved"] for e in sim.errors_by_output.values()):
            assert "cannot be told from rounding" in sim.note


def test_torch_tensors_are_converted_bf16_and_requires_grad():
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(32, 16, generator=g, dtype=torch.bfloat16) for _ in range(3))
    q.requires_grad_(True)
    sim = flashsim.simulate("flash2", 32, 16, dtype="bf16", inputs=(q, k, v), record_events=False)
    assert sim.ok
    want = flashsim.simulate("flash2", 32, 16, dtype="bf16", record_events=False,
                             inputs=[x.detach().float().numpy() for x in (q, k, v)])
    assert np.array_equal(sim.out, want.out)


def test_torch_tensor_that_is_not_real_is_refused_with_the_fix():
    torch = pytest.importorskip("torch")
    q = torch.randn(8, 4, dtype=torch.complex64)
    with pytest.raises(FlashsimError, match="real part"):
        flashsim.simulate("flash2", 8, 4, inputs=(q, q, q), record_events=False)


@pytest.mark.parametrize("call", [flashsim.traffic, flashsim.simulate])
def test_eager_ops_is_refused_for_naive(call):
    with pytest.raises(FlashsimError, match="only applies to algo='eager'"):
        call("naive", 97, 128, eager_ops="foo")
    with pytest.raises(FlashsimError, match="only applies to algo='eager'"):
        call("naive", 16, 8, eager_ops="pytorch")


def test_cli_eager_ops_for_naive_exits_non_zero(capsys):
    from flashsim.cli import main
    rc = main(["traffic", "--algo", "naive", "--n", "97", "--d", "128", "--eager-ops", "foo"])
    assert rc != 0
    assert "eager_ops only applies to algo='eager'" in capsys.readouterr().err
