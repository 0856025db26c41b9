"""Chapter 12: the learner-kernel comparison, the dashboard, and the committed H200 results the chapter shows.

The final exercise's checker is tested on the catalogue of wrong kernels (tests/course/wrong_answers/ch12.py,
tests/course/test_checkers_catalogue.py).
"""
import flashsim.kernels  # noqa: F401,I001  (before triton: decides TRITON_INTERPRET)
import json
from pathlib import Path

import pytest
import triton
import triton.language as tl

from flashsim.course.ch12.checks import learner_kernel_comparison
from flashsim.course.kit.results import recorded_names, result_source
from flashsim.solutions.ch12 import flash_inner


@triton.jit
def inner_stub(q, m_i, l_i, acc, k_base, v_base, stride_n, start_n, offs_m, offs_n, offs_d, N, D, qk_scale,
               CAUSAL: tl.constexpr):
    return m_i, l_i, acc                         # what the notebook's stub returns before the learner fills it in


def test_learner_comparison_matches_kernel_view():
    r = learner_kernel_comparison(flash_inner, n=96, d=16, quiet=True)
    assert r.simulated_load_bytes > 0
    if flashsim.kernels.INTERPRETER:
        assert r.exact
    assert r.plot() is not None
    assert "measured" in str(r.table())


def test_dashboard_without_a_kernel_frontend():
    from flashsim.course.ch12.dashboards import KernelBlockDashboard, learner_or_course_kernel, template_source
    from flashsim.errors import FlashsimError
    dash = KernelBlockDashboard(flash_inner, n=64, d=16)
    before = dict(dash.current)
    dash.update(block_m=64, causal=True)
    assert dash.current["block_m"] == 64 and dash.current["causal"]
    if flashsim.kernels.INTERPRETER:
        assert dash.current["exact"] and before["exact"]
        kv = dash.current["simulated"]["loads"]["K"]
        assert kv < before["simulated"]["loads"]["K"]
    assert "BLOCK_M=64" in dash.readout()
    assert dash.figure() is not None
    with pytest.raises(FlashsimError, match="BLOCK_N"):
        dash.update(block_n=48)
    assert "_flash_template_kernel" in template_source()
    assert learner_or_course_kernel(inner_stub, False) is None         # the course's kernel, not the answer key
    assert learner_or_course_kernel(inner_stub, True) is inner_stub
    course = KernelBlockDashboard(None, n=64, d=16)                     # the course's own flash_forward
    course.update(block_m=64, causal=True)
    assert course.current["simulated"] == dash.current["simulated"] and "course kernel" in course.readout()
    if flashsim.kernels.INTERPRETER:
        assert course.current["measured"] == dash.current["measured"]


def test_speed_plot_without_gpu():
    from flashsim.course.ch12.figures import plot_speed_vs_sdpa
    assert plot_speed_vs_sdpa(None) is not None
    fake = {"learner_ms": 1.0, "flashsim_ms": 0.9, "sdpa_ms": 0.7, "tflops": {"learner": 1, "flashsim": 1, "sdpa": 2},
            "size": {"n": 8, "d": 8, "batch": 1, "heads": 1, "causal": False, "dtype": "fp16"}}
    assert plot_speed_vs_sdpa(fake) is not None
    course_only = {**fake, "learner_ms": None, "tflops": {"flashsim": 1, "sdpa": 2},     # no passing kernel yet
                   "sdpa_backend": "cuDNN (SDPBackend.CUDNN_ATTENTION)"}
    fig = plot_speed_vs_sdpa(course_only)
    assert len(fig.axes[0].patches) == 2 and "cuDNN" in fig.axes[0].get_xticklabels()[1].get_text()


# --- the section "what an H200 adds": loaders and plots over the committed GPU results ---------------------------

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"   # the raw record (the course reads copies)
TUNE = RESULTS / "tune_h200_2026-11-30.json"
WIDE = RESULTS / "tune_h200_2026-11-30_wide.json"
SPEED = RESULTS / "attention_speed_2026-11-30_3.json"
PINGPONG = sorted(RESULTS.parents[1] / result_source(name) for name in recorded_names()   # an experiment's record
                  if name.startswith("tune_h200_pingpong_n"))


def test_tuning_summary_matches_the_committed_sweep():
    from flashsim.kernels._common import TUNED_H200
    from flashsim.course.ch12.dashboards import tuning_summary, tuning_table
    summary = tuning_summary(TUNE)
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
    table = tuning_table(summary)
    assert len(table.rows) == 12 and TUNE.name in table.caption and "64×128 w4 s2" in str(table)


def test_default_tuning_files_are_the_recorded_sweeps():
    from flashsim.course.ch12.dashboards import load_tuning, pingpong_summary, speed_headline, tuning_summary
    from flashsim.course.kit.results import result_source
    narrow, wide = load_tuning(), load_tuning(wide=True)
    assert narrow["source"] == result_source("tune_h200") == "benchmarks/results/" + TUNE.name
    assert wide["source"] == result_source("tune_h200_wide") and wide["source"].endswith("_wide.json")
    assert all(r["kernel"] in ("fwd", "dkdv", "dq", "atomic") for r in wide["rows"])
    assert [r["pointer_ms"] for r in tuning_summary()] == [r["pointer_ms"] for r in tuning_summary(TUNE)]
    assert speed_headline()["rows"] == speed_headline(SPEED)["rows"]
    assert len(pingpong_summary()) == 4 * len(PINGPONG)


def test_wide_sweep_summary_reads_stages_shared_memory_and_warp_specialization():
    from flashsim.course.ch12.dashboards import load_tuning, pipelining_table, warp_specialization_table, wide_sweep_summary
    raw = json.loads(WIDE.read_text())
    tuning = load_tuning(WIDE, wide=True)
    assert len(tuning["rows"]) == len(raw["results"]) == 590
    fwd_tma = [r for r in raw["results"] if r["kernel"] == "fwd_tma"]
    assert sum(r["kernel"] == "fwd" and r["tma"] for r in tuning["rows"]) == len(fwd_tma) > 0
    s = wide_sweep_summary(WIDE)
    assert len(s["best_by_stages"]) == 16 and set(s["best_stages"]) == set(s["best_by_stages"])
    for key, cell in s["best_by_stages"].items():
        assert cell[s["best_stages"][key]] == min(cell.values())
    oom = [m for m in raw["compile_errors"].values() if "shared memory" in m]
    assert len(s["shared_memory"]) == len(oom) > 0
    assert all(x["required"] > x["limit"] == 232448 for x in s["shared_memory"])
    ws = s["warp_specialize"]
    assert ws[4]["compiled"] == 0 and ws[4]["failed"] > 0 and "PassManager" in ws[4]["message"]
    assert ws[8]["compiled"] > 0 and len(ws[8]["ratios"]) == ws[8]["compiled"]
    assert len(pipelining_table(s).rows) == 16
    assert [row[0] for row in warp_specialization_table(s).rows] == [4, 8]


@pytest.mark.skipif(not PINGPONG, reason="no ping-pong results committed")
def test_pingpong_summary():
    from flashsim.course.ch12.dashboards import pingpong_summary, pingpong_table
    summary = pingpong_summary(PINGPONG)
    assert len(summary) == 4 * len(PINGPONG)
    for r in summary:
        assert r["speedup"] == pytest.approx(r["fwd_ms"] / r["pingpong_ms"])
    assert len(pingpong_table(summary).rows) == len(summary)


def test_speed_headline_matches_the_grid():
    from flashsim.course.ch12.dashboards import speed_headline, speed_headline_table
    h = speed_headline(SPEED)
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
    assert SPEED.name in speed_headline_table(h).caption


def test_h200_section_with_unusable_files(tmp_path, capsys):
    from flashsim.course.ch12 import dashboards as w
    missing, empty, blank = tmp_path / "none.json", tmp_path / "empty.json", tmp_path / "blank.json"
    empty.write_text("")
    blank.write_text("{}")
    for path in (missing, empty, blank):
        assert w.load_tuning(path) is None
        assert w.tuning_summary(path) == []
        assert w.wide_sweep_summary(path) is None
        assert w.speed_headline(path) is None
        assert w.pingpong_summary([path]) == []
    assert "nothing to show" in capsys.readouterr().out
    assert w.tuning_table([]) is None and w.pingpong_table([]) is None
    assert w.pipelining_table({"best_by_stages": {}}) is None and w.speed_headline_table({"rows": []}) is None


def test_tuning_plots():
    from flashsim.course.ch12.figures import plot_tuning_configs, plot_tuning_pointer_vs_tma
    from flashsim.course.ch12.dashboards import load_tuning, tuned_configs, tuning_summary
    fig = plot_tuning_pointer_vs_tma(tuning_summary(TUNE))
    assert len(fig.axes) == 3
    wide = load_tuning(WIDE, wide=True)
    fig = plot_tuning_configs(wide, highlight=tuned_configs())
    assert len(fig.axes) == 6
    assert plot_tuning_configs(wide, causal=True, kernels=("fwd",)) is not None
    assert plot_tuning_pointer_vs_tma([]) is not None and plot_tuning_pointer_vs_tma(None) is not None
    assert plot_tuning_configs(None) is not None
