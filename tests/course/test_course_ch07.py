"""Chapter 07 course code: the backward dashboards without a kernel, figures, the gradient check, and the
checkers on their solutions and on wrong answers."""
import pytest

from flashsim.course.ch07 import figures as plots
from flashsim.course.ch07.dashboards import BackwardCostDashboard, algorithm4_stepper, gradient_check


def test_backward_dashboard_store_vs_recompute():
    d = BackwardCostDashboard(n=1024, d=64)
    s = d.summary()
    assert s["backward FLOPs ratio"] == pytest.approx(0.8)  # 8 N^2 d vs 10 N^2 d
    assert s["backward bytes ratio"] > 2
    std = d.rows["standard: store P"]
    assert std.backward_part["read_bytes_by_tensor"]["P"] > 0
    fl = d.rows["flash2: recompute P"]
    assert "P" not in fl.backward_part["read_bytes_by_tensor"]
    d.update(n=4096)
    assert d.n == 4096 and "N=4096" in d.readout()
    assert d.figure() is not None and plots.figure_backward_recompute() is not None


def test_algorithm4_stepper_starts_at_backward():
    s = algorithm4_stepper()
    assert 0 < s.first_backward_step < s.n_steps and s.step == s.first_backward_step
    assert s.events[s.first_backward_step].tensor == "K"  # Algorithm 4's outer loop loads K_0 first
    last = s.update(s.n_steps - 1)
    assert (last["writes"]["dQ"] == 4).all()  # dQ_i written once per K/V block (Tc = 4)
    assert s.figure() is not None


def test_gradient_check_simulator_only_is_exact():
    g = gradient_check(n=32, d=16, kernel=False)
    assert all(rel < 1e-5 for _, _, _, rel in g["rows"])
    assert plots.plot_gradient_check(g["errors"]) is not None


def test_backward_dashboard_widgets():
    pytest.importorskip("ipywidgets")
    d = BackwardCostDashboard(n=1024)
    d.show()
    before = d.view.figure.png()
    d.widgets["n"].value = 8192
    assert d.n == 8192 and d.view.figure.png() != before
    d.update(n=2048, d=128)                              # a later cell's update moves the sliders too
    assert d.control_values() == {"n": 2048, "d": 128} == d.control_state()
