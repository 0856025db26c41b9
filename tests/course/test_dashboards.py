"""Every dashboard driven programmatically (issue 11: "a test drives every dashboard and reads its controls back").

``CASES`` is the registry: one :class:`DashCase` per dashboard, with a small factory and a non-default value for
each control. The tests below run on every case:

- ``update(...)`` without widgets changes the state;
- with the widgets shown, ``update(...)`` moves the widgets, and the controls read back equal the state; the
  readout and the figure follow;
- moving a widget (what a learner does) changes the state through the same path;
- without ipywidgets, ``show()`` returns the static figure.

To add a chapter's dashboards, append DashCase entries to CASES and the chapter to CHAPTERS (the completeness
test then checks that none is missing).
"""
from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field
from typing import Callable

import pytest

from flashsim.course.ch00.dashboards import SliderTour
from flashsim.course.ch01.dashboards import RooflineDashboard
from flashsim.course.ch02.dashboards import Algorithm0Stepper, EagerOpsDashboard, TrafficVsN
from flashsim.course.ch03.dashboards import TiledQKtStepper, TilingDashboard
from flashsim.course.ch04.dashboards import OnlineSoftmaxStepper, OverflowDemo
from flashsim.course.ch05.dashboards import FlashStepper, TrafficDashboard
from flashsim.course.ch06.dashboards import ContextMemoryDashboard
from flashsim.course.ch07.dashboards import BackwardCostDashboard
from flashsim.course.ch08.dashboards import CausalTileAnimator
from flashsim.course.ch09.dashboards import SpeedupDashboard
from flashsim.course.ch10.dashboards import CacheBlockDashboard
from flashsim.course.ch11.dashboards import MismatchExplorer, RescaleDriftDashboard, ShortSequenceDashboard
from flashsim.course.ch12.dashboards import KernelBlockDashboard
from flashsim.course.ch13.dashboards import DecodingDashboard, OverlapDashboard, RingStepper
from flashsim.course.ch14.dashboards import GluonSpeedDashboard, PipelineDashboard, ScheduleDashboard
from flashsim.course.kit import render
from flashsim.course.kit.dashboard import Dashboard
from flashsim.errors import FlashsimError


@dataclass
class DashCase:
    """A dashboard to drive: ``factory()`` builds it small; ``changes`` gives every control a non-default value
    (applied one at a time, in order); ``bad`` is one out-of-range change that must raise FlashsimError;
    ``blit`` names the controls whose change redraws only the animated artists (the fast path of issue 12)."""

    id: str
    factory: Callable[[], Dashboard]
    changes: dict
    bad: dict = field(default_factory=dict)
    blit: tuple = ()


CASES = [
    DashCase("ch00.SliderTour", SliderTour, {"n": 8192, "dtype": "bf16", "device": "a100"}, {"n": 1000},
             blit=("n",)),
    DashCase("ch01.RooflineDashboard", RooflineDashboard, {"intensity": 100.0, "device": "a100"},
             {"intensity": 1e6}, blit=("intensity",)),
    DashCase("ch02.Algorithm0Stepper", lambda: Algorithm0Stepper(n=8, d=4, block=4), {"step": 7}, {"step": 10**6},
             blit=("step",)),
    DashCase("ch02.TrafficVsN", TrafficVsN, {"n": 4096, "d": 128, "dtype": "fp32"}, {"n": 1000},
             blit=("n",)),
    DashCase("ch02.EagerOpsDashboard", EagerOpsDashboard,
             {"choice": "Megatron-LM 2020 (FA1 Fig. 2 baseline)", "causal": False, "dropout": False},
             {"choice": "no such framework"}),
    DashCase("ch03.TiledQKtStepper", TiledQKtStepper, {"step": 9}, {"step": -1}, blit=("step",)),
    DashCase("ch03.TilingDashboard", TilingDashboard, {"block_r": 32, "block_c": 32, "sram_kib": 48, "d": 128},
             {"block_r": 100}, blit=("block_r", "block_c")),
    DashCase("ch04.OnlineSoftmaxStepper", OnlineSoftmaxStepper,
             {"rescale": False, "step": 1, "row": "max grows in every block", "block": 4}, {"block": 99},
             blit=("step", "block")),
    DashCase("ch04.OverflowDemo", OverflowDemo, {"x_max": 15.5}, {"x_max": 99.0}, blit=("x_max",)),
    DashCase("ch05.FlashStepper", lambda: FlashStepper(n=8, d=4, block_r=4, block_c=4), {"step": 5},
             {"step": "five"}, blit=("step",)),
    DashCase("ch05.TrafficDashboard", TrafficDashboard, {"block_c": 128, "device": "h100"}, {"block_c": 100},
             blit=("block_c",)),
    DashCase("ch06.ContextMemoryDashboard", ContextMemoryDashboard, {"device": "a100", "batch_heads": 64, "d": 64},
             {"batch_heads": 3}, blit=("batch_heads", "d")),
    # --- chapters 07-13 ---
    DashCase("ch07.BackwardCostDashboard", lambda: BackwardCostDashboard(n=1024), {"n": 2048, "d": 128},
             {"n": 1000}, blit=("n", "d")),
    DashCase("ch08.CausalTileAnimator", lambda: CausalTileAnimator(n=32, block_r=8, block_c=8),
             {"step": 3, "n": 48, "block_r": 16, "block_c": 4}, {"block_r": 5},
             blit=("step", "n", "block_r", "block_c")),
    DashCase("ch09.SpeedupDashboard", lambda: SpeedupDashboard(n=1024),
             {"n": 2048, "d": 128, "sram_kib": 128, "device": "a100"}, {"sram_kib": 100}, blit=("n", "sram_kib")),
    DashCase("ch10.CacheBlockDashboard", lambda: CacheBlockDashboard(n=128, d=32), {"block_c": 128, "block_r": 32},
             {"block_c": 100}, blit=("block_c", "block_r")),
    DashCase("ch11.ShortSequenceDashboard", ShortSequenceDashboard, {"n": 1024, "d": 128, "heads": 8, "device": "a100"},
             {"n": 100}, blit=("n", "d", "heads")),
    DashCase("ch11.MismatchExplorer", lambda: MismatchExplorer(n=32, d=16),
             {"flash_dtype": "bf16", "flash_causal": False, "ref_dtype": "fp32", "ref_causal": False,
              "ref_on_rounded_inputs": False}, {"flash_dtype": "fp8"}),
    DashCase("ch11.RescaleDriftDashboard", lambda: RescaleDriftDashboard(n=128, d=8), {"trend": -6.0, "block": 16},
             {"trend": 20.0}, blit=("trend", "block")),
    DashCase("ch12.KernelBlockDashboard", lambda: KernelBlockDashboard(None, n=32, d=16),
             {"block_m": 16, "block_n": 64, "causal": True}, {"block_m": 48}, blit=("block_m", "block_n")),
    DashCase("ch13.RingStepper", lambda: RingStepper(world=3, n=96, d=8), {"step": 2, "causal": True},
             {"causal": "yes"}, blit=("step",)),
    DashCase("ch13.OverlapDashboard", OverlapDashboard, {"block": 1024, "link": "pcie5", "device": "a100"},
             {"block": 1000}, blit=("block",)),
    DashCase("ch13.DecodingDashboard", DecodingDashboard, {"splits": 16, "heads": 8}, {"splits": 3},
             blit=("splits",)),
    DashCase("ch14.GluonSpeedDashboard", GluonSpeedDashboard, {"dtype": "bf16", "d": 64, "causal": True},
             {"d": 96}),
    DashCase("ch14.PipelineDashboard", PipelineDashboard,
             {"stages": 3, "consumers": 3, "pingpong": True, "load": 2.0, "softmax": 0.5}, {"stages": 9}),
    DashCase("ch14.ScheduleDashboard", ScheduleDashboard,
             {"ctas": 9, "rule": "lpt", "order": "longest first", "causal": False}, {"ctas": 1}),
]

#: chapters whose dashboards must all be in CASES
CHAPTERS = ("ch00", "ch01", "ch02", "ch03", "ch04", "ch05", "ch06", "ch07", "ch08", "ch09", "ch10", "ch11", "ch12",
            "ch13", "ch14")
#: Dashboard subclasses that are bases, not dashboards
ABSTRACT = {"EventStepper"}

ids = [c.id for c in CASES]


def test_every_dashboard_is_registered():
    registered = {c.id for c in CASES}
    missing = []
    for ch in CHAPTERS:
        mod = importlib.import_module(f"flashsim.course.{ch}.dashboards")
        for name, obj in inspect.getmembers(mod, inspect.isclass):
            if (issubclass(obj, Dashboard) and obj is not Dashboard and obj.__module__ == mod.__name__
                    and name not in ABSTRACT and f"{ch}.{name}" not in registered):
                missing.append(f"{ch}.{name}")
    assert not missing, f"dashboards without a DashCase in tests/course/test_dashboards.py: {missing}"


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_update_without_widgets_changes_the_state(case):
    dash = case.factory()
    for name, value in case.changes.items():
        dash.update(**{name: value})
        assert dash.control_state()[name] == value
    assert dash.control_values() == {}          # nothing shown: no widgets
    assert dash.figure() is not None


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_update_moves_the_controls(case):
    pytest.importorskip("ipywidgets")
    dash = case.factory()
    dash.show()
    assert dash.control_values() == dash.control_state()
    for name, value in case.changes.items():
        readout, frames, png = dash.widgets["readout"].value, dash.view.figure.frames, dash.view.figure.png()
        dash.update(**{name: value})
        assert dash.control_state()[name] == value
        assert dash.control_values() == dash.control_state(), f"after update({name}={value!r})"
        assert dash.widgets["readout"].value == dash.readout()
        assert dash.view.figure.frames == frames + 1
        assert readout != dash.readout() or png != dash.view.figure.png(), f"update({name}={value!r}) showed nothing"
    # the live figure shows what a fresh figure of the same state shows (an in-place refresh keeps the layout of
    # the first drawing, so a few percent of the pixels may sit elsewhere)
    assert _differing_pixels(dash.view.figure.png(), _live_png(dash)) < 0.08


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_moving_a_widget_changes_the_state(case):
    pytest.importorskip("ipywidgets")
    dash = case.factory()
    dash.show()
    for name, value in case.changes.items():
        dash.widgets[name].value = value       # what the browser does when a learner moves the control
        assert dash.control_state()[name] == value
        assert dash.control_values() == dash.control_state()
        assert dash.widgets["readout"].value == dash.readout()


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_bad_values_raise_and_leave_controls_alone(case):
    pytest.importorskip("ipywidgets")
    dash = case.factory()
    dash.show()
    before = dash.control_state()
    with pytest.raises(FlashsimError):
        dash.update(**case.bad)
    assert dash.control_state() == before and dash.control_values() == before


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_update_of_every_control_at_once(case):
    pytest.importorskip("ipywidgets")
    dash = case.factory()
    dash.show()
    frames = dash.view.figure.frames
    dash.update(**case.changes)
    state = dash.control_state()
    assert all(state[k] == v for k, v in case.changes.items())
    assert dash.control_values() == state
    assert dash.view.figure.frames == frames + 1           # one redraw for the whole call


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_show_without_ipywidgets_returns_the_static_figure(case, hide_ipywidgets, capsys):
    from matplotlib.figure import Figure
    assert isinstance(case.factory().show(), Figure)
    assert "ipywidgets is not installed" in capsys.readouterr().out


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_the_page_shows_the_state(case, monkeypatch):
    """What the page shows after each change (blitted or fully rendered) is the state's picture; the controls
    named in ``blit`` take the fast path."""
    pytest.importorskip("ipywidgets")
    monkeypatch.setattr(render, "DEFAULT_MODE", "image")     # the Agg buffer the page shows, without a browser
    dash = case.factory()
    dash.show()
    for name, value in case.changes.items():
        blits = dash.view.figure.blits
        dash.update(**{name: value})
        if name in case.blit:
            assert dash.view.figure.blits == blits + 1, f"update({name}={value!r}) rendered the whole figure"
        # animated artists are drawn over the background, so a few pixels differ where they overlap others
        assert _differing_pixels(dash.view.figure.shown_png(), dash.view.figure.png()) < 0.04, name


def test_chapter03_later_update_moves_the_sliders_shown_earlier():
    """Chapter 03's bug: cell 7's update(sram_kib=48, ...) changed the state behind cell 6's sliders."""
    pytest.importorskip("ipywidgets")
    tiling = TilingDashboard(n=4096, d=64, sram_kib=228, block_r=64, block_c=64)
    tiling.show()
    tiling.update(sram_kib=48, block_r=256, block_c=64)
    assert tiling.widgets["sram_kib"].value == 48 and tiling.widgets["block_r"].value == 256
    tiling.widgets["block_r"].value = 128                # the learner moves Br afterwards
    assert "of 48 KiB SRAM" in tiling.widgets["readout"].value and tiling.widgets["sram_kib"].value == 48


def test_a_state_reset_moves_the_dependent_control():
    """A new row resets the step and changes how many blocks there are: the step slider and Play follow."""
    pytest.importorskip("ipywidgets")
    s = OnlineSoftmaxStepper()
    s.show()
    s.update(step=1)
    s.widgets["row"].value = "random scores (16)"
    assert s.step == 0 and s.widgets["step"].value == 0
    assert s.widgets["step"].max == s.n_steps - 1 == s.widgets["play_step"].max


def _live_png(dash) -> bytes:
    """PNG of a fresh live figure of the dashboard's current state."""
    from flashsim.course.kit.plotting import figure_to_png
    from flashsim.course.kit.render import LIVE_DPI
    plot = dash.plot(**dash.plot_args())
    plot.set_dpi(LIVE_DPI)
    return figure_to_png(plot.fig, dpi=LIVE_DPI)


def _differing_pixels(a: bytes, b: bytes) -> float:
    import io

    import numpy as np
    from PIL import Image
    pa, pb = (np.asarray(Image.open(io.BytesIO(x)).convert("RGB")).astype(int) for x in (a, b))
    assert pa.shape == pb.shape
    return float((np.abs(pa - pb).sum(-1) > 30).mean())


def test_memo_prefetch_follows_the_newest_request_and_never_computes_a_key_twice(monkeypatch):
    """Issue 12's caveat (chapter 10): two quick moves used to leave the thread on the first move's neighbours,
    and a move onto the key the thread was computing computed it a second time beside it."""
    import threading
    import time

    from flashsim.course.kit import dashboard as dash_mod
    monkeypatch.setattr(dash_mod, "QUIET_S", 0.0)
    started, release, calls = threading.Event(), threading.Event(), []

    def slow(x):
        calls.append((x, threading.current_thread() is threading.main_thread()))
        if x == 1:
            started.set()
            release.wait(5)
        return x * 10

    memo = dash_mod.Memo(slow)
    memo.prefetch([(1,), (2,), (3,)])
    assert started.wait(5)                       # the thread is computing 1
    memo.prefetch([(7,), (8,)])                  # the controls moved on: 2 and 3 are dropped
    waiter = threading.Thread(target=lambda: calls.append(("fg", memo(1))))
    waiter.start()
    time.sleep(0.2)
    assert waiter.is_alive()                     # waits for the thread's result instead of computing 1 again
    release.set()
    waiter.join(5)
    memo.wait(5)
    assert ("fg", 10) in calls and [c for c in calls if c[0] == 1] == [(1, False)]
    assert set(memo.cache) == {(1,), (7,), (8,)}
    memo.prefetch([(9,)])                        # a finished thread starts again
    memo.wait(5)
    assert memo.cache[(9,)] == 90
