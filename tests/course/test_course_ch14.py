"""Chapter 14: the recorded H200 results it shows (tuning sweeps, speed grid, the Gluon run), the Gluon kernel's
kernel view, its tile order and the warp-role picture. Everything here runs on a CPU."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from flashsim.course.ch14 import dashboards as w
from flashsim.course.ch14 import figures as f
from flashsim.course.ch14.schedule import SCHEDULES, persistent_tile_order, warp_schedule
from flashsim.course.kit.report import COURSE_MAP
from flashsim.course.kit.results import load_result, recorded_names, result_source
from flashsim.errors import FlashsimError
from flashsim.model.kernel_io import kernel_io

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"          # the raw record (the course reads copies)
TUNE = ROOT / result_source("tune_h200")
WIDE = ROOT / result_source("tune_h200_wide")
SPEED = ROOT / result_source("attention_speed_h200")
GLUON = ROOT / result_source("gluon_fwd_h200")
GLUON_BWD = ROOT / result_source("gluon_bwd_h200")
PINGPONG = sorted(ROOT / result_source(name) for name in recorded_names() if name.startswith("tune_h200_pingpong_n"))


# --- part 1: the Triton kernel's recorded sweeps ------------------------------------------------------------------

def test_tuning_summary_matches_the_committed_sweep():
    from flashsim.kernels._common import TUNED_H200
    summary = w.tuning_summary(TUNE)
    keys = {(r["kernel"], r["d"], r["causal"]) for r in summary}
    assert keys == {(k, d, c) for k in ("fwd", "dkdv", "dq") for d in (64, 128) for c in (False, True)}
    raw = json.loads(TUNE.read_text())["results"]
    for r in summary:
        mine = [x for x in raw if (x["kernel"], x["d"], x["causal"]) == (r["kernel"], r["d"], r["causal"])]
        ptr = min((x for x in mine if not x["tma"]), key=lambda x: x["ms"])
        tma = min((x for x in mine if x["tma"]), key=lambda x: x["ms"])
        assert r["pointer_ms"] == ptr["ms"] and r["tma_ms"] == tma["ms"]
        assert r["pointer_config"] == (ptr["bm"], ptr["bn"], ptr["w"], ptr["s"])
        assert r["tma_config"] == (tma["bm"], tma["bn"], tma["w"], tma["s"])
        assert r["speedup"] == pytest.approx(ptr["ms"] / tma["ms"])
        name = {"fwd": "flash_fwd", "dkdv": "flash_bwd_dkdv", "dq": "flash_bwd_dq"}[r["kernel"]]
        assert r["tuned_config"] == TUNED_H200[(name, r["d"], r["causal"])]
        assert r["n"] == 4096 and r["source"] == str(TUNE)
    by = {(r["kernel"], r["d"], r["causal"]): r for r in summary}
    assert by[("fwd", 128, False)]["speedup"] > 1          # what the chapter says: TMA faster for this forward
    assert by[("dkdv", 64, True)]["speedup"] < 1           # ... and slower for the d=64 causal K/V pass
    assert by[("fwd", 64, False)]["tuned_tma_ms"] == by[("fwd", 64, False)]["tma_ms"]
    table = w.tuning_table(summary)
    assert len(table.rows) == 12 and str(TUNE) in table.caption and "64×128 w4 s2" in str(table)


def test_default_tuning_files_are_the_recorded_sweeps():
    narrow, wide = w.load_tuning(), w.load_tuning(wide=True)
    assert narrow["source"] == result_source("tune_h200") and narrow["source"].startswith("benchmarks/results/")
    assert wide["source"] == result_source("tune_h200_wide") and wide["source"].endswith("_wide.json")
    assert all(r["kernel"] in ("fwd", "dkdv", "dq", "atomic") for r in wide["rows"])
    assert [r["pointer_ms"] for r in w.tuning_summary()] == [r["pointer_ms"] for r in w.tuning_summary(TUNE)]
    assert w.speed_headline()["rows"] == w.speed_headline(SPEED)["rows"]
    assert len(w.pingpong_summary()) == 4 * len(PINGPONG)
    # the notebook's text shows no file names or dates: the recorded results' captions say "recorded"
    for table in (w.tuning_table(), w.pipelining_table(), w.warp_specialization_table(), w.pingpong_table(),
                  w.speed_headline_table(), w.gluon_speed_table(), w.gluon_summary_table(),
                  w.pingpong_ablation_table()):
        assert "recorded" in table.caption and ".json" not in table.caption and "2026" not in table.caption


def test_wide_sweep_summary_reads_stages_shared_memory_and_warp_specialization():
    raw = json.loads(WIDE.read_text())
    tuning = w.load_tuning(WIDE, wide=True)
    assert len(tuning["rows"]) == len(raw["results"]) == 590
    fwd_tma = [r for r in raw["results"] if r["kernel"] == "fwd_tma"]
    assert sum(r["kernel"] == "fwd" and r["tma"] for r in tuning["rows"]) == len(fwd_tma) > 0
    s = w.wide_sweep_summary(WIDE)
    assert len(s["best_by_stages"]) == 16 and set(s["best_stages"]) == set(s["best_by_stages"])
    for key, cell in s["best_by_stages"].items():
        assert cell[s["best_stages"][key]] == min(cell.values())
    oom = [m for m in raw["compile_errors"].values() if "shared memory" in m]
    assert len(s["shared_memory"]) == len(oom) > 0
    assert all(x["required"] > x["limit"] == 232448 for x in s["shared_memory"])
    ws = s["warp_specialize"]
    assert ws[4]["compiled"] == 0 and ws[4]["failed"] > 0 and "PassManager" in ws[4]["message"]
    assert ws[8]["compiled"] > 0 and len(ws[8]["ratios"]) == ws[8]["compiled"]
    assert len(w.pipelining_table(s).rows) == 16
    table = w.warp_specialization_table(s)
    assert [row[0] for row in table.rows] == [4, 8]
    assert "PassManager" not in str(table)                   # no compiler log in the chapter's text


@pytest.mark.skipif(not PINGPONG, reason="no ping-pong results committed")
def test_pingpong_summary():
    summary = w.pingpong_summary(PINGPONG)
    assert len(summary) == 4 * len(PINGPONG)
    for r in summary:
        assert r["speedup"] == pytest.approx(r["fwd_ms"] / r["pingpong_ms"])
    assert len(w.pingpong_table(summary).rows) == len(summary)


def test_speed_headline_matches_the_grid():
    h = w.speed_headline(SPEED)
    rows = {(r["metric"], r["d"]): r for r in h["rows"]}
    grid = [r for r in json.loads(SPEED.read_text())["rows"] if r["n"] >= 2048]
    fwd = [r["ratio"]["flash"] for r in grid if r["mode"] == "fwd"]
    assert rows[("fwd ours/flash", "all")]["total"] == len(fwd) == 32
    assert rows[("fwd ours/flash", "all")]["min"] == min(fwd)
    assert rows[("fwd ours/flash", "all")]["met"] == sum(x >= 1.1 for x in fwd)
    cud128 = [r["ratio"]["cudnn"] for r in grid if r["mode"] == "fwd" and r["d"] == 128]
    assert rows[("fwd ours/cudnn", 128)]["max"] == max(cud128)
    assert rows[("bwd ours/cudnn", "all")]["met"] is None     # no target, shown for reference
    assert h["min_n"] == 2048 and "H200" in h["device"]
    table = w.speed_headline_table(h)
    assert str(SPEED) in table.caption and "SDPA FlashAttention-2" in str(table) and "SDPA cuDNN" in str(table)
    bwd = w.speed_headline_table(h, mode="bwd")
    assert bwd.rows and all(row[0] == "backward" for row in bwd.rows)


def test_loaders_with_unusable_files(tmp_path, capsys):
    missing, empty, blank = tmp_path / "none.json", tmp_path / "empty.json", tmp_path / "blank.json"
    empty.write_text("")
    blank.write_text("{}")
    for path in (missing, empty, blank):
        assert w.load_tuning(path) is None
        assert w.tuning_summary(path) == []
        assert w.wide_sweep_summary(path) is None
        assert w.speed_headline(path) is None
        assert w.pingpong_summary([path]) == []
        assert w.load_gluon(path) is None
    assert "nothing to show" in capsys.readouterr().out
    assert w.tuning_table([]) is None and w.pingpong_table([]) is None
    assert w.pipelining_table({"best_by_stages": {}}) is None and w.speed_headline_table({"rows": []}) is None
    assert w.gluon_summary({"rows": []}) == [] and w.gluon_rows({"rows": []}) == []


def test_tuning_plots():
    fig = f.plot_tuning_pointer_vs_tma(w.tuning_summary(TUNE))
    assert len(fig.axes) == 3
    wide = w.load_tuning(WIDE, wide=True)
    fig = f.plot_tuning_configs(wide, highlight=w.tuned_configs())
    assert len(fig.axes) == 6
    assert f.plot_tuning_configs(wide, causal=True, kernels=("fwd",)) is not None
    assert f.plot_tuning_pointer_vs_tma([]) is not None and f.plot_tuning_pointer_vs_tma(None) is not None
    assert f.plot_tuning_configs(None) is not None


# --- part 2 and 3: the Gluon run -------------------------------------------------------------------------------

def test_gluon_run_is_recorded_and_read_exactly():
    assert "gluon_fwd_h200" in recorded_names() and GLUON.parent == RESULTS
    raw = json.loads(GLUON.read_text())
    assert load_result("gluon_fwd_h200") == raw
    g = w.load_gluon()
    assert g["source"] == result_source("gluon_fwd_h200") and g["device"] == "NVIDIA H200"
    assert len(g["rows"]) == len(raw["rows"]) == 32
    for mine, theirs in zip(g["rows"], raw["rows"]):    # the forward of a same-run table: keys end in _fwd
        assert mine["n"] == theirs["N"] and mine["correct"] is theirs["fwd_correct"] is True
        for k in w.GLUON_KERNELS:
            assert mine["ms"][k] == theirs[f"{k}_fwd_ms"] and mine["tflops"][k] == theirs[f"{k}_fwd_tflops"]
        assert w._ratio(mine, "gluon", "cudnn") == pytest.approx(theirs["gluon_fwd_vs_cudnn"])
        assert w._ratio(mine, "gluon", "flash") == pytest.approx(theirs["gluon_fwd_vs_flash"])
        assert w._ratio(mine, "gluon", "triton") == pytest.approx(theirs["gluon_fwd_vs_triton"])
    assert g["checks"] == {"passed": 40, "total": 40, "not_run": 0}
    assert g["configs"][(64, False)]["NC"] == 3 and g["configs"][(128, True)]["BLOCK_N"] == 128
    # ping-pong as each row's configuration had it (the overrides by N included)
    on = {(r["d"], r["causal"], r["n"]): r["pingpong"] for r in g["rows"] if r["dtype"] == "fp16"}
    assert on[(64, False, 2048)] and not on[(64, True, 4096)] and not on[(128, False, 2048)]
    assert on[(128, True, 8192)] and not on[(128, True, 16384)]


def test_gluon_summary_says_what_the_chapter_says():
    by = {(s["d"], s["causal"]): s for s in w.gluon_summary()}
    everything = by[("all", None)]
    assert everything["rows"] == 32 and everything["met"] == 11       # "11 of the 32 rows"
    g_cudnn = everything["ratios"][("gluon", "cudnn")]
    assert round(min(g_cudnn), 2) == 0.80 and round(max(g_cudnn), 2) == 1.15   # "within 20% in all of them"
    g_triton = everything["ratios"][("gluon", "triton")]
    assert sum(x >= 1.0 for x in g_triton) == 30 and min(g_triton) > 0.945      # "4-5% slower in the other two"
    t_cudnn = everything["ratios"][("triton", "cudnn")]
    assert sum(x >= 1.0 for x in t_cudnn) == 3 and max(t_cudnn) < 1.025        # "in three d = 64 rows, at most 2.5%"
    assert all(r["d"] == 64 for r in w.gluon_rows() if r["ms"]["cudnn"] >= r["ms"]["triton"])
    assert min(everything["ratios"][("triton", "flash")]) > 1.25            # ... and well ahead of FA-2
    assert sum(by[k]["met"] for k in by if k != ("all", None)) == 11
    table = w.gluon_summary_table()
    assert len(table.rows) == 5 and table.rows[-1][2] == "11/32"


def test_gluon_speed_table_and_ablation():
    table = w.gluon_speed_table()
    assert len(table.rows) == 32 and "SDPA FlashAttention-2 TFLOP/s" in table.header
    assert sum(row[-1] == "yes" for row in table.rows) == 11
    assert len(w.gluon_speed_table(dtype="bf16", d=64, causal=True).rows) == 4
    assert w.gluon_speed_table(d=96) is None
    ab = w.pingpong_ablation()
    # ping-pong off: fp16 rows only, and only those whose configuration has it on ("the 9 fp16 rows")
    assert len(ab) == 9 and {r["dtype"] for r in ab} == {"fp16"}
    for r in ab:
        assert r["change"] == pytest.approx(r["on_ms"] / r["off_ms"] - 1)
    assert round(min(r["change"] for r in ab), 2) == -0.11 and round(max(r["change"] for r in ab), 2) == 0.06
    # the other 7 fp16 rows: one kernel timed twice, "differed by up to 9%"
    same = [r for r in w.gluon_rows(dtype="fp16") if r["pingpong"] is False]
    assert len(same) == 7 and max(abs(r["ms"]["gluon"] / r["no_pingpong_ms"] - 1) for r in same) < 0.095
    assert len(w.pingpong_ablation_table().rows) == 9
    features = w.feature_table()
    assert sum("not measured" in row[-1] for row in features.rows) >= 4
    assert any(row[0].startswith("ping-pong") and "9 rows" in row[-1] for row in features.rows)


def test_roles_and_ring_tables():
    roles = w.warp_roles_table()
    assert len(roles.rows) == 4
    by = {(row[0], row[1]): row for row in roles.rows}
    assert by[(64, "no")][4] == 192 and by[(128, "no")][4] == 128
    assert by[(128, "no")][7] == "192 KiB"          # Q 2 x 2 x 16 KiB + K 2 x 32 KiB + V 2 x 32 KiB
    ring = w.ring_protocol_table(stages=3, consumers=3)
    assert {row[0]: row[1] for row in ring.rows}["k_empty[s]"] == 3
    with pytest.raises(FlashsimError):
        w.ring_protocol_table(stages=0)


@pytest.mark.parametrize("n,d,causal", [(4096, 128, False), (2048, 64, False), (4096, 64, True), (1000, 128, True),
                                        (129, 64, False)])
def test_gluon_io_is_the_flash_forward_kernel_view_with_its_blocks(n, d, causal):
    cfg = w.load_gluon()["configs"][(d, causal)]
    io = w.gluon_io(n, d, causal, batch=2, heads=3, triton_blocks=(64, 64))
    bm = cfg["NC"] * 64
    (want,) = kernel_io("flash_fwd", n, d, bm, 128, causal=causal, batch=2, heads=3).per_tensor().values()
    assert io["gluon"] == want and io["block_m"] == bm and io["block_n"] == 128
    (tri,) = kernel_io("flash_fwd", n, d, 64, 64, causal=causal, batch=2, heads=3).per_tensor().values()
    assert io["triton"] == tri
    nd = 2 * 3 * n * d * 2
    assert io["gluon"]["loads"]["Q"] == nd and io["gluon"]["stores"]["O"] == nd
    if not causal:
        assert io["kv_reads"] == math.ceil(n / bm)                      # K, V once per query tile
    # whole TMA boxes: never fewer bytes than the masked view, more exactly when a tile runs past N
    for t in ("Q", "K", "V"):
        assert io["box_bytes"][t] >= io["gluon"]["loads"][t]
    assert (io["box_bytes"]["Q"] > io["gluon"]["loads"]["Q"]) == (n % bm != 0)
    assert (io["box_bytes"]["K"] > io["gluon"]["loads"]["K"]) == (n % 128 != 0)
    tiles = 2 * 3 * math.ceil(n / bm)
    assert io["prefetch_bytes"] == min(132, tiles) * (bm + 128) * d * 2
    assert io["floor"]["loads"]["K"] == nd                             # every byte once


def test_gluon_io_refuses_what_the_kernel_does_not_cover():
    with pytest.raises(FlashsimError, match="d in"):
        w.gluon_io(1024, 96)
    with pytest.raises(FlashsimError, match="fp16 or bf16"):
        w.gluon_io(1024, 64, dtype="fp32")
    assert w.gluon_io(1024, 96, consumers=2, block_n=64, triton_blocks=(64, 64))["block_m"] == 128
    table = w.gluon_io_table(4096, 128, batch=4, heads=16)
    assert len(table.rows) == 6 and "32.0 times" in table.caption


def _tile_coords(t, bh, n_mblk, sec):
    """The Gluon kernel's _tile_coords (flashsim/kernels/gluon/fwd_sm90.py), line for line, as the oracle."""
    sec_tiles = sec * n_mblk
    first = (t // sec_tiles) * sec
    r = t % sec_tiles
    heads = min(sec, bh - first)
    return first + r % heads, n_mblk - 1 - r // heads


@pytest.mark.parametrize("heads,blocks,sec", [(8, 6, 2), (7, 5, 3), (4, 1, 4), (1, 9, 2), (5, 4, 99)])
def test_persistent_tile_order_is_the_kernels(heads, blocks, sec):
    order = persistent_tile_order(heads, blocks, sec)
    assert order == [_tile_coords(t, heads, blocks, min(sec, heads)) for t in range(heads * blocks)]
    assert sorted(order) == [(h, m) for h in range(heads) for m in range(blocks)]      # every tile once
    group = min(sec, heads)
    for first in range(0, heads, group):                       # longest first inside each group
        blocks_seen = [m for h, m in order if first <= h < first + group]
        assert blocks_seen == sorted(blocks_seen, reverse=True)
    with pytest.raises(FlashsimError):
        persistent_tile_order(0, blocks, sec)


def test_warp_schedule_picture():
    runs = {m: warp_schedule(m, kv_tiles=4) for m in SCHEDULES}
    assert runs["in order"]["tensor_busy"] < 0.6 < runs["overlap"]["tensor_busy"]
    assert runs["overlap"]["end"] < runs["in order"]["end"]
    for s in runs.values():
        tc = sorted((b[1], b[2]) for b in s["bars"] if b[0] == "tensor cores")
        assert all(a[0] + a[1] <= b[0] + 1e-9 for a, b in zip(tc, tc[1:]))       # one matmul at a time
        qk = [b for b in s["bars"] if b[4] == "qk"]
        pv = [b for b in s["bars"] if b[4] == "pv"]
        assert len(qk) == len(pv) == (4 if s["mode"] == "in order" else 8)
    with pytest.raises(FlashsimError):
        warp_schedule("sideways")
    assert len(f.plot_warp_roles().axes) == 3
    assert len(f.plot_tile_order().axes) == 2


def test_speed_dashboard_and_plot():
    dash = w.GluonSpeedDashboard(dtype="fp16", d=128, causal=False)
    assert [r["n"] for r in dash.current] == [2048, 4096, 8192, 16384]
    assert "1/4 rows" in dash.readout()
    dash.update(dtype="bf16", d=128, causal=False)
    assert "course Gluon, ping-pong off" not in dash.plot_args()["series"]    # not timed in bf16
    dash.update(dtype="fp16", d=64, causal=True)
    assert "course Gluon, ping-pong off" in dash.plot_args()["series"]
    with pytest.raises(FlashsimError):
        dash.update(d=96)
    assert dash.figure() is not None
    assert f.plot_gluon_speed([1, 2], {"course Gluon": [1.0, None]}) is not None


def test_measure_here_without_hopper_says_why(capsys):
    from flashsim.kernels.gluon import available
    if available()[0]:
        pytest.skip("a Hopper GPU with Gluon is here: measure_here runs for real")
    assert w.measure_here(n=256, d=64) is None
    assert capsys.readouterr().out.strip()


def test_gluon_backward_rows_are_the_recorded_run():
    raw = [r for r in json.loads(GLUON_BWD.read_text())["rows"] if r["dtype"] == "float16"]
    rows = f.gluon_backward_rows()
    assert len(rows) == len(raw) == 16 and all(r["correct"] for r in rows)
    one = next(r for r in raw if r["d"] == 128 and not r["causal"] and r["N"] == 4096)
    got = next(r for r in rows if r["d"] == 128 and not r["causal"] and r["N"] == 4096)
    assert got["course Gluon"] == one["gluon_tflops"] and got["SDPA cuDNN"] == one["cudnn_tflops"]
    assert got["vs cuDNN"] == pytest.approx(one["cudnn_ms"] / one["gluon_ms"])
    assert all(r["SDPA FlashAttention-2"] < r["course Gluon"] < r["SDPA cuDNN"] for r in rows)   # as recorded
    fwd = f.gluon_backward_rows(mode="fwd", dtype="bfloat16")
    assert len(fwd) == 16 and fwd[0]["course Gluon"] == next(
        r for r in json.loads(GLUON_BWD.read_text())["rows"] if r["dtype"] == "bfloat16")["gluon_fwd_tflops"]
    assert f.gluon_backward_rows({"rows": []}) == []


def test_plot_gluon_backward_draws_one_panel_per_head_dim_and_mask():
    fig = f.plot_gluon_backward()
    assert len(fig.axes) == 4
    assert [len(ax.lines) for ax in fig.axes] == [4] * 4        # cuDNN, FlashAttention-2, Gluon, the 0.9x line
    assert len(f.plot_gluon_backward({"rows": []}).axes) == 1   # nothing recorded: a one-line figure, no error


def test_chapter_14_is_on_the_course_map():
    entry = [e for e in COURSE_MAP if e[0] == "14"]
    assert len(entry) == 1 and (ROOT / "notebooks" / entry[0][1]).exists()


@pytest.mark.parametrize("notebook", ["12_final_exercise.ipynb", "14_hopper_full_speed.ipynb"])
def test_hopper_text_is_teaching_not_a_lab_log(notebook):
    """Issue 12: no dates, result file names, "the lent H200", compiler logs or a stale Triton version in the text;
    SDPA's backends named wherever SDPA's speed is."""
    nb = json.loads((ROOT / "notebooks" / notebook).read_text())
    text = "\n".join("".join(c["source"]) for c in nb["cells"])
    for bad in ("2026-", "_h200_", ".json", "lent H200", "PassManager", "Hardware limit", "Triton 3."):
        assert bad not in text, f"{notebook}: {bad!r} in the text"
    assert all(c.get("outputs", []) == [] for c in nb["cells"])
    if "Speed against SDPA" in text:
        assert "FlashAttention-2" in text and "SDPBackend" in text
