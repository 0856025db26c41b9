"""Chapter 11: pitfalls dashboards (no Jupyter kernel), plots, and checkers on solutions and wrong answers."""

from flashsim import plots, widgets


def test_short_sequences_win_shrinks():
    short, long_ = widgets.short_sequence_times(128), widgets.short_sequence_times(8192)
    assert short["core_speedup"] < long_["core_speedup"]
    assert short["layer_speedup"] < 1.2 < 3.0 < long_["layer_speedup"]
    dash = widgets.ShortSequenceDashboard(n=512)
    dash.update(n=8192, heads=32)
    assert dash.current["n"] == 8192 and dash.current["heads"] == 32
    assert "whole layer" in dash.readout()
    assert dash.figure() is not None


def test_mismatch_diagnoses():
    ex = widgets.MismatchExplorer(n=64, d=16)
    assert ex.current["diagnosis"].startswith("ROUNDING ONLY")
    ex.update(ref_causal=False)
    assert ex.current["diagnosis"].startswith("MASK MISMATCH")
    row = ex.current["row_error"]
    assert row[0] > 0.1 and row[-1] < 1e-2          # O(1) first rows, ~0 at the last row
    ex.update(ref_causal=True, flash_dtype="bf16", ref_dtype="fp32", ref_on_rounded_inputs=False)
    assert ex.current["diagnosis"].startswith("ROUNDING ONLY")
    assert ex.figure() is not None
    try:
        ex.update(bogus=1)
    except ValueError:
        pass
    else:
        raise AssertionError("unknown setting accepted")


def test_rescale_drift_depends_on_the_data():
    early = widgets.rescale_drift(trend=-12.0)
    late = widgets.rescale_drift(trend=12.0)
    assert early["final_err_bug"] < 1e-12 and late["final_err_bug"] > 1e-2
    assert late["final_err_ok"] < 1e-12
    dash = widgets.RescaleDriftDashboard()
    dash.update(block=64, trend=8.0)
    assert dash.current["block"] == 64 and dash.figure() is not None


def test_flops_sweep_is_quadratic():
    s = widgets.flops_sweep((256, 512), d=64)
    assert s["naive"] == s["flash"]
    assert s["flash"][1] == 4 * s["flash"][0]
    assert plots.plot_flops_vs_n(s) is not None


def test_side_by_side_plot_of_comparisons():
    from flashsim.course.kit.real_gpu import Comparison
    c = Comparison("flash_fwd", {"n": 8}, "interpreter", 100, 10, 100, 10)
    assert plots.plot_comparisons_side_by_side({"a": c, "b": c}) is not None


def test_show_without_ipywidgets_gives_the_static_figure(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "ipywidgets", None)      # import ipywidgets -> ImportError
    for dash in (widgets.ShortSequenceDashboard(n=256), widgets.RescaleDriftDashboard(n=128),
                 widgets.MismatchExplorer(n=32, d=8), widgets.SpeedupDashboard(n=1024)):
        fig = dash.show()
        assert fig.__class__.__name__ == "Figure"
