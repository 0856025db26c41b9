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
GLUON_BLOCK = ROOT / result_source("gluon_bwd_block_h200")        # the d=64 backward, 128- vs 64-row query blocks
GLUON_LSE = ROOT / result_source("gluon_bwd_lse_smem_h200")       # the backward, L and delta via shared memory or not
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
                  w.pingpong_ablation_table(), w.gluon_misses_table(), w.gluon_ablation_summary_table(),
                  *(w.gluon_ablation_table(name) for name in w.GLUON_ABLATIONS)):
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
        assert w.load_gluon(path) is None and w.load_gluon_backward(path) is None
    assert "nothing to show" in capsys.readouterr().out
    assert w.tuning_table([]) is None and w.pingpong_table([]) is None
    assert w.pipelining_table({"best_by_stages": {}}) is None and w.speed_headline_table({"rows": []}) is None
    assert w.gluon_summary({"rows": []}) == [] and w.gluon_rows({"rows": []}) == []
    assert w.gluon_headline({"rows": []}) == {} and w.gluon_headline_text(headline={}) == "no Gluon run to summarise"
    assert w.gluon_misses_table({"rows": [], "source": "x"}) is None


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
        # ratios: the median of the per-round ratios, as the run computed its own
        assert w._ratio(mine, "gluon", "cudnn") == pytest.approx(theirs["gluon_fwd_vs_cudnn"], rel=1e-12)
        assert w._ratio(mine, "gluon", "flash") == pytest.approx(theirs["gluon_fwd_vs_flash"], rel=1e-12)
        assert w._ratio(mine, "gluon", "triton") == pytest.approx(theirs["gluon_fwd_vs_triton"], rel=1e-12)
        assert mine["timed"]["gluon"]["rounds"] == theirs["gluon_fwd_rounds_ms"]
    assert g["rounds"] == 5                                      # "in five interleaved rounds"
    # the run has no checks of its own (--grid none): those of the grid run in the same call
    assert raw["checks"] == [] and g["checks"] == {"passed": 40, "total": 40, "bwd_passed": 40, "bwd_total": 40,
                                                    "not_run": 0}
    assert w.load_gluon(GLUON)["checks"]["total"] == 0          # a file without checks and no grid: none
    assert w.load_gluon(GLUON, grid=ROOT / result_source("gluon_grid_h200"))["checks"] == g["checks"]
    assert all(r["correct"] for r in w.load_gluon_backward()["rows"])   # "every timed row checked on its own inputs"
    assert g["configs"][(64, False)]["NC"] == 3 and g["configs"][(128, True)]["BLOCK_N"] == 128
    # ping-pong as each row's configuration had it (the overrides by N included)
    on = {(r["d"], r["causal"], r["n"]): r["pingpong"] for r in g["rows"] if r["dtype"] == "fp16"}
    assert on[(64, False, 2048)] and not on[(64, True, 4096)] and not on[(128, False, 2048)]
    assert on[(128, True, 8192)] and not on[(128, True, 16384)]


def test_gluon_summary_says_what_the_chapter_says():
    by = {(s["d"], s["causal"]): s for s in w.gluon_summary()}
    everything = by[("all", None)]
    assert everything["rows"] == 32 and everything["met"] == 19
    assert sum(by[k]["met"] for k in by if k != ("all", None)) == 19
    table = w.gluon_summary_table()
    assert len(table.rows) == 5 and table.rows[-1][2] == "19/32"
    # the text: "the Triton kernel is already well ahead of SDPA's FlashAttention-2 backend in every row, and the
    # Gluon kernel further still in most rows"
    assert min(everything["ratios"][("triton", "flash")]) > 1.25
    ahead = [gf > tf for gf, tf in zip(everything["ratios"][("gluon", "flash")],
                                       everything["ratios"][("triton", "flash")])]
    assert sum(ahead) > len(ahead) / 2
    # "against cuDNN the Triton kernel is behind almost everywhere, most at d = 128"
    t_cudnn = everything["ratios"][("triton", "cudnn")]
    assert sum(x >= 1.0 for x in t_cudnn) <= 2
    assert max(by[(128, c)]["ratios"][("triton", "cudnn")][i] for c in (False, True) for i in range(8)) < min(
        by[(64, c)]["ratios"][("triton", "cudnn")][i] for c in (False, True) for i in range(8))
    # "the Gluon kernel closes most of that gap and passes cuDNN in many rows"
    assert everything["met"] > 12


def test_gluon_headline_is_the_runs_own_count():
    """The counts the chapter prints (gluon_headline_text) against the run's own summary (its md's outcome)."""
    h = w.gluon_headline()
    f, b = h["forward"]["vs_cudnn"], h["backward"]["vs_cudnn"]
    assert (f["rows"], f["met"], f["every_round"], f["no_round"]) == (32, 19, 5, 2)
    assert (round(f["min"], 2), round(f["max"], 2)) == (0.91, 1.11)
    assert (b["rows"], b["met"], round(b["min"], 2), round(b["max"], 2)) == (32, 32, 0.92, 1.08)
    t = h["backward"]["vs_triton"]
    assert (t["rows"], t["met"], round(t["min"], 2), round(t["max"], 2)) == (16, 16, 1.12, 1.50)
    assert (h["forward"]["vs_triton"]["met"], h["forward"]["vs_triton"]["rows"]) == (28, 32)
    raw = json.loads(GLUON.read_text())["rows"]
    assert f["met"] == sum(r["gluon_fwd_vs_cudnn"] >= 1.0 for r in raw)
    assert b["met"] == sum(r["gluon_vs_cudnn"] >= 0.9 for r in raw)
    text = w.gluon_headline_text("forward", h)
    assert "19 of the 32 rows" in text and "28 of 32 rows" in text and "0.91×–1.11×" in text
    assert "32 of the 32 rows" in w.gluon_headline_text("backward", h)
    assert "13 rows miss" in w.gluon_headline_text("misses", h)
    assert "19 of 32" in w.gluon_headline_text("takeaway", h)
    with pytest.raises(FlashsimError):
        w.gluon_headline_text("sideways", h)
    bwd = w.load_gluon_backward()
    assert bwd["source"] == result_source("gluon_bwd_h200") and len(bwd["rows"]) == 32
    assert bwd["configs"][(64, False)]["BLOCK_M"] == 128 and bwd["configs"][(128, True)]["BLOCK_M"] == 64
    assert sum("triton" in r["ms"] for r in bwd["rows"]) == 16          # the Triton backward: fp16 rows only


def test_gluon_misses_say_what_section_13_says():
    misses = w.gluon_misses_table()
    keys = {(row[0], row[1], row[2], row[3]) for row in misses.rows}
    assert len(keys) == 13
    # d = 128 without a mask: every N, both dtypes
    assert all((dt, 128, "no", n) in keys for dt in ("fp16", "bf16") for n in (2048, 4096, 8192, 16384))
    # causal d = 64 only at small N; causal d = 128 at N = 16,384 no longer misses
    assert all(n <= 8192 for dt, d, c, n in keys if d == 64)
    assert not any(d == 128 and c == "yes" and n == 16384 for dt, d, c, n in keys)
    # "2,048 query tiles of 128 rows for 132 CTAs, 15.5 each"
    r = next(r for r in w.gluon_rows(d=128, causal=False))
    assert r["batch"] * r["heads"] * r["n"] // 128 == 2048 and round(2048 / 132, 1) == 15.5


def test_gluon_speed_table_and_ablation():
    table = w.gluon_speed_table()
    assert len(table.rows) == 32 and "SDPA FlashAttention-2 TFLOP/s" in table.header
    assert sum(row[-1] == "yes" for row in table.rows) == 19
    assert "5 interleaved rounds" in table.caption
    assert len(w.gluon_speed_table(dtype="bf16", d=64, causal=True).rows) == 4
    assert w.gluon_speed_table(d=96) is None
    ab = w.pingpong_ablation()
    # ping-pong off: fp16 rows only, and only those whose configuration has it on
    assert len(ab) == 9 and {r["dtype"] for r in ab} == {"fp16"} and ab == w.gluon_ablation("pingpong")
    raw = {(r["d"], r["causal"], r["N"]): r for r in json.loads(GLUON.read_text())["rows"] if r["dtype"] == "float16"}
    for r in ab:
        one = raw[(r["d"], r["causal"], r["n"])]
        per = [off / on for on, off in zip(one["gluon_fwd_rounds_ms"], one["gluon_no_pingpong_fwd_rounds_ms"])]
        assert r["speedup"] == pytest.approx(sorted(per)[2]) and r["rounds_min"] == min(per)
        assert r["change"] == pytest.approx(1 / r["speedup"] - 1)
        assert r["on_ms"] == one["gluon_fwd_ms"] and r["off_ms"] == one["gluon_no_pingpong_fwd_ms"]
    assert len(w.pingpong_ablation_table().rows) == 9


def test_each_measured_switch_says_what_section_12_says():
    summary = {s["name"]: s for s in w.gluon_ablation_summary()}
    assert set(summary) == set(w.GLUON_ABLATIONS)
    # ping-pong: "changes in both directions, and in no row the same sign in every round"
    pp = summary["pingpong"]
    assert pp["change_min"] < 0 < pp["change_max"] and pp["faster_every_round"] == pp["slower_every_round"] == 0
    # balanced lists: "causal d = 128 at N = 16,384, faster in every round, in both dtypes" (17% and 27%); "in the
    # other causal rows ... a few percent either way"
    bal = w.gluon_ablation("balanced")
    assert len(bal) == 16 and all(r["causal"] for r in bal)
    raw = {(r["dtype"], r["d"], r["N"]): r for r in json.loads(GLUON.read_text())["rows"] if r["causal"]}
    for r in bal:
        one = raw[({"fp16": "float16", "bf16": "bfloat16"}[r["dtype"]], r["d"], r["n"])]
        assert r["speedup"] == pytest.approx(one["gluon_fwd_vs_committed"], rel=1e-12)
        assert one["fwd_committed_config"]["BALANCED"] is False and one["fwd_config"]["BALANCED"] == "lpt"
    big = [r for r in bal if r["d"] == 128 and r["n"] == 16384]
    assert len(big) == 2 and all(r["rounds_min"] > 1 for r in big)
    assert sorted(round(r["speedup"] - 1, 2) for r in big) == [0.17, 0.27]
    assert all(abs(r["speedup"] - 1) < 0.07 for r in bal if r not in big)
    # the backward's switches: "made every row faster"; L and delta most at causal d = 128
    block = w.gluon_ablation("bwd_block")
    assert len(block) == 16 and all(r["d"] == 64 and r["speedup"] > 1 for r in block)
    rows = {(r["dtype"], r["causal"], r["N"]): r for r in json.loads(GLUON_BLOCK.read_text())["rows"]}
    for r in block:
        one = rows[({"fp16": "float16", "bf16": "bfloat16"}[r["dtype"]], r["causal"], r["n"])]
        assert r["off_ms"] == one["gluon_committed_full_ms"] and r["on_ms"] == one["gluon_ms"]
    lse = w.gluon_ablation("lse_smem")
    assert len(lse) == 32 and all(r["speedup"] > 1 for r in lse)
    assert all(r["rounds_min"] is None for r in lse)                     # that run timed once per row
    top = sorted(lse, key=lambda r: r["speedup"])[-8:]
    assert all(r["d"] == 128 and r["causal"] for r in top)
    assert summary["lse_smem"]["faster_every_round"] is None and summary["bwd_block"]["faster_with"] == 16
    # every measured feature says its range in the feature table
    features = {row[0]: row[-1] for row in w.feature_table().rows}
    for name in ("longest first (causal)", "ping-pong between consumers", "backward: L and δ through shared memory",
                 "backward: 128-row query blocks at d=64"):
        assert features[name].startswith("measured in ") and " to " in features[name], name
    assert "measured in 9 rows" in features["ping-pong between consumers"]
    assert "measured in 16 rows" in features["longest first (causal)"]
    assert sum("not measured" in text for text in features.values()) >= 4


def test_ablations_with_wrong_or_empty_input():
    with pytest.raises(FlashsimError, match="pingpong"):
        w.gluon_ablation("sideways")
    with pytest.raises(FlashsimError):
        w.gluon_ablation_table("sideways")
    empty = {"rows": [], "source": "mine.json", "configs": {}}
    for name in w.GLUON_ABLATIONS:
        assert w.gluon_ablation(name, empty) == [] and w.gluon_ablation_table(name, empty) is None
    assert w.pingpong_ablation(empty) == [] and w.pingpong_ablation_table(empty) is None
    # a run without the switched-off column: nothing to show, not an error
    assert w.gluon_ablation("balanced", w.load_gluon(GLUON_BLOCK)) == []       # no balanced lists beside
    assert w.gluon_ablation("bwd_block", w.load_gluon_backward(GLUON_BWD)) == []   # no 64-row blocks beside
    assert w.gluon_ablation_summary({name: empty for name in w.GLUON_ABLATIONS}) == []
    assert w.gluon_ablation_summary_table({name: empty for name in w.GLUON_ABLATIONS}) is None
    features = w.feature_table(runs={name: empty for name in w.GLUON_ABLATIONS})
    assert not any(row[-1].startswith("measured in ") and "rows" in row[-1] for row in features.rows)


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
    assert "0/4 rows" in dash.readout()
    dash.update(dtype="bf16", d=128, causal=False)
    assert "course Gluon, ping-pong off" not in dash.plot_args()["series"]    # not timed in bf16
    assert "course Gluon, balanced lists off" not in dash.plot_args()["series"]    # causal rows only
    dash.update(dtype="fp16", d=64, causal=True)
    assert "course Gluon, ping-pong off" in dash.plot_args()["series"]
    stride = dash.plot_args()["series"]["course Gluon, balanced lists off"]
    assert stride == [r["timed"]["gluon_committed"]["tflops"] for r in dash.current]
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
    assert got["vs cuDNN"] == one["gluon_vs_cudnn"]         # the median of the per-round ratios
    assert all(r["SDPA FlashAttention-2"] < r["course Gluon"] for r in rows)   # as recorded
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


def test_chapter_14_numbers_in_the_text_are_the_recorded_ones():
    """The few numbers the prose keeps (the rest are printed from the data): each against what it was computed
    from."""
    nb = json.loads((ROOT / "notebooks" / "14_hopper_full_speed.ipynb").read_text())
    text = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    assert "in five interleaved rounds" in text and w.load_gluon()["rounds"] == 5
    for stale in ("11 of the 32", "11 of 32", "18 of 32", "0.80–1.00", "30 of 32 rows and", "1.14–1.50",
                  "within 4%", "1–22%", "one ablation"):
        assert stale not in text, stale
    big = sorted(r["speedup"] for r in w.gluon_ablation("balanced") if r["d"] == 128 and r["n"] == 16384)
    assert "17% and 27%" in text and [round(100 * (x - 1)) for x in big] == [17, 27]
    # the IO against ncu: the model's dK/dV pass, the dQ buffer, their sums and how far below ncu's
    from flashsim.model.kernel_io import kernel_dram
    dkdv = kernel_dram("flash_bwd", 4096, 128, 64, 128, batch=4, heads=16)["_bwd_dkdv"]
    m, ncu = w.gluon_dram_model(), w.gluon_ncu_io()["kernels"]["gluon_bwd"]
    assert "predicts 271 and 114 MB" in text and "134 MB each: 405 and 249 MB, 4% and 6% below" in text
    assert (round(dkdv.dram_read_bytes / 1e6), round(dkdv.dram_write_bytes / 1e6)) == (271, 114)
    assert (round(m["bwd_read_bytes"] / 1e6), round(m["bwd_write_bytes"] / 1e6)) == (405, 249)
    assert round(100 * (1 - m["bwd_read_bytes"] / ncu["dram_read_bytes"])) == 4
    assert round(100 * (1 - m["bwd_write_bytes"] / ncu["dram_write_bytes"])) == 6
    assert "423 MB read and 263 MB written" in text
    assert (round(ncu["dram_read_bytes"] / 1e6), round(ncu["dram_write_bytes"] / 1e6)) == (423, 263)
    assert "bytes within 6%" in text
