"""Chapter 05 course code: dashboards without a kernel, figures, and every checker on its solution and on wrong
answers."""
import numpy as np
import pytest

from flashsim.course.ch05 import checks as ex
from flashsim.course.ch05.dashboards import FlashStepper, TrafficDashboard, flash_vs_naive_errors, loop_order_bytes
from flashsim.course.ch05 import figures as plots
from flashsim.model.paper import PAPER_FIG2_MIDDLE_GB


def test_traffic_dashboard_reproduces_fa1_fig2_middle():
    d = TrafficDashboard()
    for bc, paper in PAPER_FIG2_MIDDLE_GB.items():
        t = d.update(block_c=bc)
        assert round(t.hbm_bytes / 1e9, 2) == paper
        assert d.current_traffic is t
        assert t.hbm_bytes == ex.fa1_reference_bytes(1024, 64, bc, 2) * 1024
    assert "paper: 1.09 GB" in d.readout()


def test_traffic_dashboard_update_changes_figure_and_reports_misfit():
    d = TrafficDashboard()
    png64 = plots.figure_to_png(d.figure())
    d.update(block_c=128)
    assert plots.figure_to_png(d.figure()) != png64
    d.update(block_c=512, device="t4")
    assert not d.fits() and "does not fit" in d.readout()
    assert d.figure() is not None
    with pytest.raises(ValueError):
        d.update(block_c=100)


def test_flash_stepper_replays_sram_and_stats():
    s = FlashStepper(n=16, d=8, block_r=4, block_c=4, algo="flash1")
    assert s.n_steps > 0 and all(ev.kind != "free" for ev in s.events)
    st = s.update(0)
    assert st["in_sram"] == {("K", 0)} and st["current"] == {("K", 0)}
    last = s.update(10**6)
    assert last["step"] == s.n_steps - 1
    assert np.isfinite(last["m"]).all() and np.isfinite(last["l"]).all()
    # FA1 writes each row of O once per K/V block
    assert (last["writes"]["O"] == 4).all()
    s2 = FlashStepper(algo="flash2")
    assert (s2.update(s2.n_steps - 1)["writes"]["O"] == 1).all()
    assert s.figure() is not None


def test_flash_vs_naive_exact_not_bitwise():
    e = flash_vs_naive_errors(n=64, d=16, dtype="fp16")
    assert not e["bitwise_equal"]
    assert 0 < e["max"]["flash - naive"] < 5e-3
    assert e["max"]["flash - exact"] <= e["max"]["naive - exact"] * 2
    assert plots.plot_flash_vs_naive_error({k: e[k] for k in ("flash - exact", "flash - naive")}) is not None


def test_loop_order_bytes_and_plots():
    b = loop_order_bytes(n=256, d=32, block_r=32, block_c=32)
    assert b["flash2"]["O"] == 256 * 32 * 2 and b["flash1"]["O"] > b["flash2"]["O"]
    assert plots.plot_loop_order(3, 4, b) is not None
    assert plots.figure_fa1_fig2_middle() is not None


def test_widget_wiring_without_a_kernel():
    """show() builds real ipywidgets; moving a control redraws the picture (what the browser test checks)."""
    pytest.importorskip("ipywidgets")
    d = TrafficDashboard()
    d.show()
    w = d.widgets
    assert w["block_c"].description == "block_c" and "flashsim-block-c-slider" in w["block_c"]._dom_classes
    assert "flashsim-traffic-plot" in w["figure"]._dom_classes
    before, text, frames = d.view.figure.png(), w["readout"].value, d.view.figure.frames
    w["block_c"].value = 128
    assert d.block_c == 128 and d.view.figure.frames == frames + 1 and w["readout"].value != text
    assert d.view.figure.png() != before
    w["device"].value = "t4"
    assert d.device == "t4"
    s = FlashStepper()
    s.show()
    before = s.view.figure.png()
    s.widgets["step"].value = 20
    assert s.step == 20 and s.view.figure.png() != before


def test_show_falls_back_to_a_figure_without_ipywidgets(hide_ipywidgets, capsys):
    """A bare GPU machine has no ipywidgets: show() prints one line and returns the static figure."""
    from matplotlib.figure import Figure
    assert isinstance(TrafficDashboard().show(), Figure)
    assert isinstance(FlashStepper().show(), Figure)
    assert "ipywidgets is not installed" in capsys.readouterr().out
