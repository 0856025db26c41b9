"""Chapter 06 course code: the memory model and dashboard without a kernel, the measurement, figures, and the
checkers on their solutions and on wrong answers."""
import pytest

from flashsim.course.ch06 import figures as plots
from flashsim.solutions import ch06 as sol
from flashsim.course.ch06.dashboards import (HBM_CAPACITY_BYTES, ContextMemoryDashboard, attention_memory_bytes,
                                   max_context_for, measure_peak_memory)


def test_memory_model():
    n, d = 8192, 128
    assert attention_memory_bytes("naive", n, d) - attention_memory_bytes("flash", n, d) == 2 * n * n * 2 - 4 * n
    assert attention_memory_bytes("flash", 2 * n, d, 4) == 2 * attention_memory_bytes("flash", n, d, 4)
    with pytest.raises(ValueError):
        attention_memory_bytes("sparse", n, d)


def test_max_context_is_the_largest_that_fits():
    for algo in ("naive", "flash"):
        n = max_context_for(HBM_CAPACITY_BYTES["a100"], algo, 64, 16)
        assert attention_memory_bytes(algo, n, 64, 16) <= HBM_CAPACITY_BYTES["a100"]
        assert attention_memory_bytes(algo, n + 1, 64, 16) > HBM_CAPACITY_BYTES["a100"]
        assert n == sol.max_context_length(HBM_CAPACITY_BYTES["a100"], 64, 16, 2, algo)


def test_context_dashboard_updates():
    c = ContextMemoryDashboard()
    before = dict(c.max_n)
    c.update(device="a100", batch_heads=64)
    assert c.max_n["naive"] < before["naive"] and c.max_n["flash"] > 20 * c.max_n["naive"]
    assert "a100" in c.readout() and c.figure() is not None
    with pytest.raises(ValueError):
        c.update(device="tpu")
    assert plots.figure_context_memory() is not None


def test_measured_peak_memory_slopes():
    m = measure_peak_memory(ns=(512, 1024, 2048), d=32)
    assert m["naive"][2] / m["naive"][1] > 3.5          # quadratic
    assert m["flash"][2] / m["flash"][1] < 2.2          # linear (or better)
    for got, model in zip(m["naive"], m["naive_model"]):
        assert abs(got / model - 1) < 0.05
    assert plots.plot_peak_memory(m) is not None


def test_context_dashboard_widgets():
    pytest.importorskip("ipywidgets")
    c = ContextMemoryDashboard()
    c.show()
    before = c.view.figure.png()
    c.widgets["device"].value = "t4"
    assert c.device == "t4" and c.view.figure.png() != before and "t4" in c.widgets["readout"].value


def test_without_numba_and_a_gpu_one_line_then_the_recorded_measurement(monkeypatch, capsys):
    import sys
    for name in ("numba", "torch", "triton"):
        monkeypatch.setitem(sys.modules, name, None)
    m = measure_peak_memory(ns=(256, 512, 1024, 2048), d=64)
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and 'pip install "flashsim[cpu]"' in out and "recorded" in out
    assert m["recorded"] and m["ns"] == [512, 1024, 2048] and "benchmarks/results/cpu_peak_memory" in m["backend"]
    assert m["naive"][2] / m["naive"][1] > 3.5 and m["flash"][2] / m["flash"][1] < 2.2
    for got, model in zip(m["naive"] + m["flash"], m["naive_model"] + m["flash_model"]):
        assert abs(got / model - 1) < 0.05
    assert plots.plot_peak_memory(m) is not None
