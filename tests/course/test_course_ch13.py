"""Chapter 13 course code: dashboards without a kernel, figures, and every checker on its solution and on
plausible wrong answers."""
import pytest

from flashsim.course.ch13 import figures as plots
from flashsim.course.ch05.figures import figure_to_png
from flashsim.course.ch13.dashboards import DecodingDashboard, OverlapDashboard, RingStepper, h200_results


def test_ring_stepper_steps_and_causal():
    r = RingStepper(world=4, n=256, d=16)
    assert r.n_steps == 4
    first = r.update(0)
    assert first["step"]["held"] == [0, 1, 2, 3] and all(first["step"]["sends"])
    last = r.update(99)
    assert last["step"]["t"] == 3 and not any(last["step"]["sends"])
    assert last["step"]["link_bytes"] == r.result.link_bytes
    png = figure_to_png(r.figure())
    r.set_causal(True)
    assert r.state["step"]["t"] == 3 and r.result.link_bytes[-1] == 0
    assert figure_to_png(r.figure()) != png
    assert "bytes" in r.readout()


def test_overlap_dashboard_verdicts():
    d = OverlapDashboard(block=4096, link="nvlink4")
    assert d.state["hidden"] and "hides" in d.readout()
    d.update(block=1024, link="pcie5")
    assert not d.state["hidden"] and "waits" in d.readout()
    assert d.figure() is not None


def test_decoding_dashboard_and_plot():
    d = DecodingDashboard(splits=1)
    t1 = d.current.time_s
    d.update(splits=16)
    assert d.current.time_s < t1 and "faster" in d.readout()
    d.update(heads=1)
    assert d.current.programs == 16
    assert plots.plot_decoding_splits(measured={1: 9e-4, 8: 1.5e-4}, current=8) is not None


def test_plots():
    assert plots.plot_overlap() is not None
    assert plots.plot_ring_bytes([10, 10], [10, 10]) is not None


def test_h200_results_are_the_recorded_runs():
    res = h200_results()
    assert res["flash_decoding"]["rows"] and res["flash_decoding"]["sweep"] and res["distributed"]["runs"]
    assert res["flash_decoding"]["file"].startswith("flash_decoding_h200_")


def test_widget_wiring_without_a_kernel():
    pytest.importorskip("ipywidgets")
    r = RingStepper(world=3, n=96, d=8)
    r.show()
    before = r.view.figure.png()
    r.widgets["step"].value = 2
    assert r.step == 2 and r.view.figure.png() != before
    r.widgets["causal"].value = True
    assert r.causal and r.result.link_bytes[-1] == 0
    r.update(0)                                          # a later cell's update moves the controls too
    assert r.control_values() == {"step": 0, "causal": True} == r.control_state()
    o = OverlapDashboard()
    o.show()
    o.widgets["link"].value = "pcie5"
    assert o.link == "pcie5"
    d = DecodingDashboard()
    d.show()
    before = d.view.figure.png()
    d.widgets["splits"].value = 16
    assert d.splits == 16 and d.view.figure.png() != before


def test_lab_only_the_real_sections_say_so_and_show_the_h200_recordings(monkeypatch, capsys):
    import sys
    from flashsim.course.ch13.dashboards import ring_on_processes, split_kv_here
    for name in ("torch", "triton"):
        monkeypatch.setitem(sys.modules, name, None)
    runs = ring_on_processes(world=2, heads=2, n=256, d=64)
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and 'pip install "flashsim[kernels]"' in out and "H200" in out
    assert [r.causal for r in runs] == [False, True] and all(r.ok and r.backend == "nccl" for r in runs)
    assert runs[1].sent_bytes[-1] == 0 and runs[0].table() is not None
    assert plots.plot_ring_bytes(runs[0].sent_bytes, runs[0].simulated_bytes, title="recorded") is not None
    here = split_kv_here()
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("torch and triton are not installed") and len(out) == 1 + len(here["recorded"])
    assert here["recorded"] and here["measured_bytes"] is None
