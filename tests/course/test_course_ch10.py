"""Chapter 10: the CPU view — dashboards without a Jupyter kernel, plots, checkers on solutions and wrong answers."""

import threading

import pytest

from flashsim import plots, widgets
from flashsim.solutions import ch10 as sol


def test_hierarchy_and_plot():
    h = widgets.cpu_hierarchy()
    assert h["preset"].sram_bytes > 0 and h["cores"] >= 1
    assert plots.plot_hierarchy_cpu_gpu(h) is not None


def test_time_and_memory_measured():
    m = widgets.cpu_time_memory(ns=(256, 1024), d=32, repeat=1)
    assert m["naive_peak"][1] >= 1024 * 1024 * 4            # the N x N score matrix
    # both peaks follow the memory model of this machine: flash's holds a few tiles per numba thread, so on a
    # machine with many cores it drops below naive's only at a larger N; its growth with N is O(N d) everywhere
    for kind in ("flash", "naive"):
        for got, want in zip(m[f"{kind}_peak"], m[f"{kind}_predicted"]):
            assert abs(got - want) <= 0.02 * want + 16384, (kind, got, want)
    assert (m["flash_peak"][1] - m["flash_peak"][0]) < (m["naive_peak"][1] - m["naive_peak"][0]) / 5
    assert max(m["flash_err"]) < 1e-5
    assert plots.plot_cpu_time_memory(m) is not None


def test_cache_block_dashboard():
    dash = widgets.CacheBlockDashboard(n=256, d=32, block_r=64, block_c=128)
    assert dash.current["working_set"] == sol.step_working_set_bytes(64, 128, 32)
    dash.update(block_c=1024, block_r=256)
    assert dash.current["block_r"] == 256 and dash.current["level"] in ("L1d", "L2", "L3", "DRAM")
    assert dash.current["time_s"] > 0
    assert "blocks" in dash.readout()
    sweep = dash.sweep(block_cs=(64, 128), block_r=64)
    assert len(sweep["time_s"]) == 2
    assert dash.figure(sweep) is not None




def test_the_working_set_is_the_cpu_kernels_own():
    from flashsim import cpu
    for br, bc, d in ((64, 640, 64), (16, 16, 24), (256, 1024, 128), (64, 64, 72)):
        assert cpu.step_working_set_bytes(br, bc, d) == sol.step_working_set_bytes(br, bc, d)


def test_without_numba_one_line_then_the_recorded_measurements(monkeypatch, capsys):
    import sys
    monkeypatch.setitem(sys.modules, "numba", None)
    m = widgets.cpu_time_memory(ns=(512, 1024, 2048))
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and 'pip install "flashsim[cpu]"' in out and "benchmarks/results/cpu_speed" in out
    assert m["n"] == [512, 1024, 2048] and m["naive_peak"][2] >= 2048 * 2048 * 4
    assert m["flash_peak"][2] < m["naive_peak"][2] / 2 and max(m["flash_err"]) < 1e-5
    assert plots.plot_cpu_time_memory(m) is not None
    dash = widgets.CacheBlockDashboard(d=32)
    assert capsys.readouterr().out.count("\n") == 1 and dash.recorded and (dash.n, dash.d) == (4096, 64)
    assert dash.current["time_s"] > 0 and dash.current["working_set"] == sol.step_working_set_bytes(64, 640, 64)
    dash.update(block_r=32, block_c=192)
    assert dash.current["time_s"] is None and "not timed" in dash.readout()
    sweep = dash.sweep(block_r=256)
    assert sweep["block_r"] == 256 and len(sweep["time_s"]) == len(sweep["block_c"]) >= 5
    assert dash.figure() is not None and dash.figure(sweep) is not None


def test_the_shown_dashboard_times_the_next_block_r_while_the_controls_rest(monkeypatch):
    """On the page, the sweeps one block_r step away are timed in the background: moving there times nothing and
    only redraws the animated curves (issue 12: a first visit used to time 20 block pairs before the frame)."""
    pytest.importorskip("ipywidgets")
    from flashsim.course.ch10.dashboards import CPU_BLOCK_CS
    from flashsim.course.kit import render
    monkeypatch.setattr(render, "DEFAULT_MODE", "image")
    dash = widgets.CacheBlockDashboard(n=128, d=32, block_r=64, block_c=128)
    assert not dash._times.cache.keys() - {(64, 128)}           # not on the page: nothing timed ahead
    dash.show()
    dash._times.wait(120)
    assert {(br, bc) for br in (32, 128) for bc in CPU_BLOCK_CS} <= set(dash._times.cache)
    timed_on_the_move, measure = [], dash._times.fn

    def spy(*key):
        if threading.current_thread() is threading.main_thread():
            timed_on_the_move.append(key)
        return measure(*key)
    monkeypatch.setattr(dash._times, "fn", spy)
    blits = dash.view.figure.blits
    dash.update(block_r=128)
    assert dash.view.figure.blits == blits + 1 and dash.current["time_s"] == dash._times.cache[(128, 128)]
    assert dash.sweep()["time_s"] == [dash._times.cache[(128, bc)] for bc in CPU_BLOCK_CS]
    assert timed_on_the_move == []
    dash._times.wait(120)                                        # the next neighbours (block_r 256), in the background
    assert (256, 128) in dash._times.cache
