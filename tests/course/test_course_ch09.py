"""Chapter 09: Θ(N²d²/M) sweep, speedup dashboard (no Jupyter kernel), L2 rows, plots, checkers."""
import json

from flashsim import plots, widgets
from flashsim.model import paper
from flashsim.course.ch09.checks import check_flash2_bytes
from flashsim.solutions import ch09 as sol


def test_theta_sweep_ratio_is_flat_for_flash1():
    s = widgets.theta_sweep(ns=(1024, 4096), d=64, sram_kibs=(16, 32, 128, 228))
    for n in s["ns"]:
        r = s["ratio"][n]
        assert max(r) / min(r) < 1.5, r
        assert s["bytes"][n][0] > s["bytes"][n][-1]
    assert plots.plot_theta_sweep(s) is not None


def test_speedup_dashboard():
    dash = widgets.SpeedupDashboard(n=4096, d=64, sram_kib=228)
    c = dash.current
    assert c["naive"].bound == "memory"
    # FA2's default Br = 256 makes flash compute-bound here: the L2 cannot speed it up further
    assert c["roofline_flash"].bound == "compute" and c["speedup_dram"] == c["speedup_requested"] > 1
    dash.update(sram_kib=64)                 # Br = 128: memory-bound on requested bytes, the L2 helps
    assert dash.current["speedup_dram"] > dash.current["speedup_requested"] > 1
    dash.update(n=1024, sram_kib=64, device="a100")
    assert dash.current["n"] == 1024 and dash.current["device"] == "a100"
    assert "Speedup" in dash.readout()
    assert dash.figure() is not None
    dash.update(n=32768, sram_kib=16)        # too many tiles for the L2 model: skipped, not slow
    assert dash.current["speedup_dram"] is None and "skipped" in dash.readout()


def test_l2_rows_model_and_json(tmp_path):
    model = widgets.l2_rows(configs=((1, 4, 1024, 64),), path=str(tmp_path / "missing.json"))
    assert model["source"].startswith("L2 model")
    row = model["rows"][0]
    assert row["dram_simulated"] < row["requested"]
    fake = {"ncu_sweep": [{"config": {"kernel": "flash_fwd", "batch": 1, "heads": 4, "n": 1024, "d": 64, "block_m": 128,
                                      "block_n": 64,
                                      "causal": False},
                                           "measured": {"total": {"global_load_bytes": 10, "global_store_bytes": 2,
                                                  "dram_read_bytes": 5, "dram_write_bytes": 1}},
                           "simulated": {"load_bytes": 10, "store_bytes": 2, "dram_read_bytes": 4,
                                         "dram_write_bytes": 1}}]}
    tma_row = json.loads(json.dumps(fake["ncu_sweep"][0]))          # a TMA row: its L1 counters miss the copies
    tma_row["set"] = "tma"
    tma_row["measured"]["total"]["global_load_bytes"] = 0
    fake["ncu_sweep"].append(tma_row)
    path = tmp_path / "kernels_h200_test.json"
    path.write_text(json.dumps(fake))
    got = widgets.l2_rows(path=str(path))
    assert got["source"].startswith("ncu on H200") and got["rows"][0]["dram_measured"] == 6
    assert len(got["rows"]) == 1                                     # the TMA row is not a requested-byte compare
    assert plots.plot_l2_rows(got) is not None and plots.plot_l2_rows(model) is not None
    recorded = widgets.l2_rows()                                     # the recorded ncu sweep (package data)
    assert recorded["source"].startswith("Nsight Compute sweep, measured on an NVIDIA H200, 2026-") and recorded["rows"]
    assert all(r["dram_measured"] is not None for r in recorded["rows"])


def test_fig2_left_plot():
    assert plots.plot_fig2_left(paper.fig2_left(l2=False)) is not None


def test_flash2_bytes_checker():
    assert check_flash2_bytes(sol.flash2_forward_bytes)
    off_by_one = lambda n, d, br, es, ss: n * d * es + (n // br) * 2 * n * d * es + n * d * es + n * ss  # noqa: E731
    assert not check_flash2_bytes(off_by_one)
    assert not check_flash2_bytes(lambda n, d, br, es, ss: 4 * n * d * es + n * ss)    # K/V read once


def test_measured_block_sweep_follows_one_over_block():
    sweep = widgets.measured_block_sweep(block_ms=(16, 64), n=64, d=16)
    a, b = sweep[16], sweep[64]
    assert a.simulated_load_bytes > b.simulated_load_bytes
    if a.backend == "interpreter":
        assert a.exact and b.exact
    assert plots.plot_block_sweep(sweep) is not None
