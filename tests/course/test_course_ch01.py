"""Chapter 01: presets table, roofline dashboard and plots, exercises 01.1-01.3."""
import pytest
from matplotlib.figure import Figure

import flashsim.exercises as ex
import flashsim.plots as plots
import flashsim.widgets as widgets
from flashsim import get_device
from flashsim.model.dtypes import dtype_bytes
from flashsim.errors import FlashsimError
from flashsim.solutions import ch01 as sol


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


def test_check_matmul_intensity():
    assert ex.check_matmul_intensity(sol.matmul_intensity, quiet=True)
    assert not ex.check_matmul_intensity(                     # forgot the bytes of writing C
        lambda m, n, k, dt: 2 * m * n * k / ((m * k + k * n) * dtype_bytes(dt)), quiet=True)


def test_check_which_bound():
    assert ex.check_which_bound(sol.which_bound, quiet=True)
    assert not ex.check_which_bound(                          # the inequality the wrong way round
        lambda i, dev: "memory" if i >= get_device(dev).ridge_point_flops_per_byte else "compute", quiet=True)


def test_check_min_kernel_time():
    assert ex.check_min_kernel_time(sol.min_kernel_time, quiet=True)

    def wrong(flops, nbytes, dev):                            # min instead of max
        hw = get_device(dev)
        return min(nbytes / hw.hbm_bandwidth_bytes_per_s, flops / hw.peak_matmul_flops)
    assert not ex.check_min_kernel_time(wrong, quiet=True)
