"""Chapter 01: presets table, roofline dashboard and plots, exercises 01.1-01.3."""
import pytest
from matplotlib.figure import Figure

import flashsim.plots as plots
import flashsim.widgets as widgets
from flashsim import get_device
from flashsim.errors import FlashsimError


def test_device_table_lists_every_gpu_preset():
    t = widgets.device_table()
    assert [r[0] for r in t.rows] == ["a100", "h100", "h200", "rtx4090", "t4"]
    h200 = next(r for r in t.rows if r[0] == "h200")
    assert h200[2] == 228 and h200[3] == 132 and abs(h200[-1] - 206.0) < 0.1


def test_roofline_dashboard_update():
    r = widgets.RooflineDashboard(device="h200", intensity=16.0)
    assert r.current.bound == "memory"
    assert abs(r.attainable_flops - 16 * 4.8e12) < 1
    r.update(intensity=500.0)
    assert r.current.bound == "compute" and r.attainable_flops == get_device("h200").peak_matmul_flops
    r.update(device="t4", intensity=150.0)
    assert r.current.bound == "memory"
    with pytest.raises(FlashsimError):
        r.update(intensity=0)
    assert "bound" in r.readout()
    assert isinstance(r.figure(), Figure)


def test_attention_intensities_naive_below_flash():
    i = widgets.attention_intensities(4096, 64)
    assert i["naive"] < i["flash2"]


def test_plots_return_figures():
    assert isinstance(plots.plot_roofline(("h200", "a100"), highlight="h200", points=[("x", 10.0)], intensity=3.0),
                      Figure)
    assert isinstance(plots.plot_memory_levels("a100"), Figure)


def test_show_builds_widgets():
    pytest.importorskip("ipywidgets")
    assert type(widgets.RooflineDashboard().show()).__name__ == "VBox"


