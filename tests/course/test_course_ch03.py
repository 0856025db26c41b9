"""Chapter 03: tiled QKᵀ stepper, tiling dashboard, exercises 03.1-03.3 (incl. an off-by-one block)."""

import pytest
from matplotlib.figure import Figure

import flashsim.exercises as ex
import flashsim.plots as plots
import flashsim.widgets as widgets
from flashsim.errors import FlashsimError
from flashsim.solutions import ch03 as sol


def test_tiled_qkt_stepper_matches_closed_form():
    s = widgets.TiledQKtStepper(n=16, d=4, block_r=4, block_c=4)
    last = s.update(step=s.n_steps - 1)
    want = ex.tiled_qkt_bytes(16, 4, 4, 4, "fp16")
    assert last["read_by_tensor"] == want["read"] and last["write_by_tensor"] == want["write"]
    s.update(step=7)
    assert s.state["phase"] == "row block i = 0"
    assert isinstance(s.figure(), Figure)
    with pytest.raises(FlashsimError):
        widgets.TiledQKtStepper(block_r=4, block_c=8)


def test_tiling_dashboard_fit_and_error():
    t = widgets.TilingDashboard(n=4096, d=64, sram_kib=228, block_r=64, block_c=64)
    assert t.fits and t.error is None
    assert t.paper_blocks == (64, 456)
    t.update(sram_kib=48, block_r=256)
    assert not t.fits and "48 KiB" in t.error and "block_r <= 64" in t.error
    assert t.hbm_bytes(16) > t.hbm_bytes(64) > t.hbm_bytes(256)
    with pytest.raises(FlashsimError):
        t.update(block_r=100)
    assert "does not fit" in t.readout()
    assert isinstance(t.figure(), Figure)


def test_plot_tiling_and_show():
    assert isinstance(plots.plot_tiling({"a": 10, "b": 20}, 64, [8, 16], [3, 2], [True, False], 8), Figure)
    pytest.importorskip("ipywidgets")
    assert type(widgets.TiledQKtStepper().show()).__name__ == "VBox"
    assert type(widgets.TilingDashboard().show()).__name__ == "VBox"


def test_paper_blocks_agree_with_resolve_blocks_before_rounding():
    import flashsim
    br, bc = sol.paper_blocks(228 * 1024, 64, "fp16")
    assert (br, bc) == (64, 456)
    t = flashsim.traffic("flash1", n=4096, d=64, device="h200")   # resolve_blocks: FA1's rule, then powers of two
    assert (t.block_r, t.block_c) == (br, 1 << (bc.bit_length() - 1))


