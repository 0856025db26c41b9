"""Chapter 00: the slider tour, the S-bytes plot, the verdict helper, and exercises 00.1-00.2."""

import pytest
from matplotlib.figure import Figure

import flashsim.plots as plots
import flashsim.widgets as widgets
from flashsim.errors import FlashsimError


def test_slider_tour_update_without_a_kernel():
    t = widgets.SliderTour(n=1024)
    text = t.update(n=8192, dtype="fp16", device="h200")
    assert t.s_bytes == 134_217_728 and "128.00 MiB" in text
    assert t.fits_in() == "HBM only"
    t.update(n=128, dtype="fp32")
    assert t.s_bytes == 128 * 128 * 4 and t.fits_in() == "SRAM (one SM)"
    t.update(n=2048, dtype="fp16", device="h200")
    assert t.fits_in() == "L2"
    with pytest.raises(FlashsimError):
        t.update(n=1000)
    with pytest.raises(FlashsimError):
        t.update(dtype="int8")
    assert isinstance(t.figure(), Figure)


def test_slider_tour_show_builds_widgets():
    pytest.importorskip("ipywidgets")
    box = widgets.SliderTour().show()
    assert type(box).__name__ == "VBox"


def test_plot_matrix_bytes_returns_figure():
    assert isinstance(plots.plot_matrix_bytes(4096, "bf16", "a100"), Figure)


def test_show_without_ipywidgets_returns_a_static_figure(hide_ipywidgets, capsys):
    fig = widgets.SliderTour().show()
    assert isinstance(fig, Figure)
    assert "static view" in capsys.readouterr().out
