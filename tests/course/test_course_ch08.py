"""Chapter 08 course code: the causal tile animator without a kernel, figures, and the checkers."""
import numpy as np
import pytest

from flashsim.model.simulator import traffic
from flashsim.course.ch08 import figures as plots
from flashsim.course.ch08.dashboards import CausalTileAnimator, causal_kind_grid, causal_partial_masks, causal_saving_sweep


def test_kind_grid_matches_the_simulator_skip_rule():
    # the K bytes of causal flash2 = the visible tiles' columns, for square, rectangular and ragged grids
    for n, br, bc in ((64, 8, 8), (70, 16, 8), (33, 4, 16)):
        kinds = causal_kind_grid(n, br, bc)
        d = 16
        k_bytes = sum(min(bc, n - j * bc) * d * 4 for i, j in zip(*np.nonzero(kinds != "skip")))
        t = traffic("flash2", n, d, block_r=br, block_c=bc, dtype="fp32", causal=True)
        assert t.read_bytes_by_tensor["K"] == k_bytes


def test_animator_steps_and_grid_changes():
    a = CausalTileAnimator(n=64, block_r=8, block_c=8)
    assert a.state["counts"] == {"skip": 28, "partial": 8, "full": 28}
    assert a.step == 0 and a.state["kv_bytes_loaded"] == 0
    a.update(step=3)
    assert a.state["current"] == (1, 1) and a.state["kv_bytes_loaded"] == 3 * 2 * 8 * 64 * 2
    a.update(step="end")
    assert a.step == a.n_steps == 36
    a.update(n=33, block_r=8, block_c=4)
    assert a.step == 0 and a.kinds.shape == (5, 9)
    assert a.figure() is not None


def test_plots_and_sweep():
    s = causal_saving_sweep(ns=(256, 1024, 4096))
    ratios = [c / f for c, f in zip(s["causal"]["FLOPs"], s["noncausal"]["FLOPs"])]
    assert ratios[0] > ratios[1] > ratios[2] > 0.5
    assert plots.plot_causal_saving(s["ns"], s["noncausal"], s["causal"]) is not None
    assert plots.plot_tile_masks(causal_partial_masks(20, 8, 4), 8, 4) is not None
    assert plots.figure_causal_tiles() is not None


def test_animator_widgets():
    pytest.importorskip("ipywidgets")
    a = CausalTileAnimator()
    a.show()
    w = a.widgets
    before = a.view.figure.png()
    w["step"].value = 5
    assert a.step == 5 and a.view.figure.png() != before
    w["block_c"].value = 16
    assert a.block_c == 16 and w["step"].max == w["play_step"].max == a.n_steps and a.step == 0
    a.update(n=64, block_r=8, block_c=8, step="end")      # a later cell: the controls follow
    assert a.control_values() == {"step": 36, "n": 64, "block_r": 8, "block_c": 8} == a.control_state()
