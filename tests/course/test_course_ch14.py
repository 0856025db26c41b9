"""Chapter 14: the ring model (slots, barrier phases, the pipeline timeline), persistent tile scheduling, the
warp-specialized kernel's kernel view, the recorded H200 run it shows as one figure, its dashboards, and its text.
Everything here runs on a CPU."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flashsim.course.ch14 import dashboards as w
from flashsim.course.ch14 import figures as f
from flashsim.course.ch14 import runs, tables
from flashsim.course.ch14.ring import pipeline_timeline, ring_slot_phase
from flashsim.course.ch14.schedule import RULES, deal, persistent_tile_order, tile_costs
from flashsim.course.kit.report import COURSE_MAP
from flashsim.course.kit.results import result_source
from flashsim.errors import FlashsimError
from flashsim.model.kernel_io import kernel_io

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "14_hopper_full_speed.ipynb"
TUNE = ROOT / result_source("tune_h200")
GLUON = ROOT / result_source("gluon_fwd_h200")
GLUON_BWD = ROOT / result_source("gluon_bwd_h200")


# --- the ring: slots and phases ------------------------------------------------------------------------------------

def _ring_by_simulation(i: int, stages: int) -> tuple[int, int, int]:
    """The oracle: fill a ring tile by tile, counting each slot's uses. The consumers wait for the ready barrier's
    completion number `uses` (0-based) and the producer for the release of the previous use, completion number
    `uses - 1` of empty; an mbarrier wait names that completion's parity, and completion -1 (parity 1) counts as
    done on a fresh barrier."""
    uses = [0] * stages
    for t in range(i + 1):
        s = t % stages
        ready_parity, empty_parity = uses[s] % 2, (uses[s] - 1) % 2
        uses[s] += 1
    return s, ready_parity, empty_parity


@given(st.integers(0, 200), st.integers(1, 8))
def test_ring_slot_phase_is_a_simulated_ring(i, stages):
    assert ring_slot_phase(i, stages) == _ring_by_simulation(i, stages)


def test_ring_slot_phase_matches_the_kernels_expressions():
    """fwd_sm90's waits: k_ready with (kc // STAGES) & 1, k_empty with ((kc // STAGES) & 1) ^ 1."""
    src = (ROOT / "flashsim" / "kernels" / "gluon" / "fwd_sm90.py").read_text()
    assert "mbarrier.wait(k_ready.index(s_idx), (kc // STAGES) & 1)" in src
    assert "mbarrier.wait(k_empty.index(s), ((kc // STAGES) & 1) ^ 1)" in src
    for kc in range(40):
        for stages in (1, 2, 3, 4):
            assert ring_slot_phase(kc, stages) == (kc % stages, (kc // stages) & 1, ((kc // stages) & 1) ^ 1)
    with pytest.raises(FlashsimError):
        ring_slot_phase(-1, 2)
    with pytest.raises(FlashsimError):
        ring_slot_phase(0, 0)


# --- the pipeline timeline -----------------------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(st.integers(1, 4), st.integers(1, 3), st.integers(1, 8), st.sampled_from([0.25, 1.0, 2.5, 4.0]),
       st.sampled_from([0.5, 1.0, 1.5, 3.0]), st.booleans())
def test_pipeline_timeline_keeps_the_protocol(stages, consumers, kv_tiles, load, softmax, pingpong):
    t = pipeline_timeline(stages, consumers, kv_tiles, load=load, softmax=softmax, pingpong=pingpong)
    bars = t["bars"]
    loads = [b for b in bars if b[4] == "load"]
    tc = sorted((b[1], b[2], b[3]) for b in bars if b[0] == "tensor cores")
    assert len(loads) == kv_tiles
    assert all(a[0] + a[1] <= b[0] + 1e-9 for a, b in zip(tc, tc[1:]))            # one product at a time
    copies = sorted((b[1], b[2]) for b in loads)
    assert all(a[0] + a[1] <= b[0] + 1e-9 for a, b in zip(copies, copies[1:]))    # one copy at a time
    landed = {int(b[3][2:]): b[1] + b[2] for b in loads}
    pv_end = {}
    for start, dur, label in tc:
        j = int(re.match(r"(?:S|PV)(\d+)", label).group(1))
        if label.startswith("S"):
            assert start >= landed[j] - 1e-9                                         # read only a full slot
        else:
            pv_end[j] = max(pv_end.get(j, 0.0), start + dur)
    for j, start in ((int(b[3][2:]), b[1]) for b in loads):
        if j >= stages:
            assert start >= pv_end[j - stages] - 1e-9                                # refill only a released slot
    products = sum(d for _, d, _ in tc)
    assert products == pytest.approx(2 * kv_tiles * consumers * 1.0)                # every S and PV, once each
    assert 0 < t["tensor_busy"] <= 1 and t["end"] >= products
    assert t["phases"] == [(i, *ring_slot_phase(i, stages)) for i in range(kv_tiles)]


def test_pipeline_timeline_says_what_the_chapter_says():
    per_rows = {(s, c, pp): pipeline_timeline(s, c, 6, load=1.0, softmax=1.5, pingpong=pp)["end"] / c
                for s in (1, 2, 3) for c in (1, 2, 3) for pp in (False, True)}
    # "the second slot is worth the most ... a third slot adds nothing here"
    for c in (1, 2, 3):
        for pp in (False, True):
            assert per_rows[(2, c, pp)] < per_rows[(1, c, pp)]
            assert per_rows[(3, c, pp)] == pytest.approx(per_rows[(2, c, pp)])
    # "one consumer cannot fill the tensor cores": two products and a softmax in a chain
    one = pipeline_timeline(2, 1, 6, load=1.0, softmax=1.5)
    assert one["tensor_busy"] < 2 / 3.5 + 1e-9
    # "consumers in step do not fix that ... the same idle gap"; "ping-pong does"
    step, pp = pipeline_timeline(2, 2, 6, softmax=1.5), pipeline_timeline(2, 2, 6, softmax=1.5, pingpong=True)
    softmax_gaps = [b for b in step["bars"] if b[4] == "softmax" and b[0] == "consumer 0"]
    assert all(any(s[1] == g[1] for s in step["bars"] if s[4] == "softmax" and s[0] == "consumer 1")
               for g in softmax_gaps)                                                 # side by side
    assert pp["tensor_busy"] > 0.9 > step["tensor_busy"] and pp["end"] < step["end"]
    # with one consumer ping-pong changes nothing
    assert pipeline_timeline(2, 1, 6, pingpong=True)["end"] == one["end"]
    # copies as long as a tile's four products: the ring depth matters again
    slow = [pipeline_timeline(s, 2, 6, load=4.0, softmax=1.5, pingpong=True)["end"] for s in (1, 2, 3)]
    assert slow[0] > slow[1] > slow[2]
    with pytest.raises(FlashsimError):
        pipeline_timeline(0, 2)
    with pytest.raises(FlashsimError):
        pipeline_timeline(2, 2, softmax=float("nan"))


# --- persistent scheduling -----------------------------------------------------------------------------------------

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
    with pytest.raises(FlashsimError):
        persistent_tile_order(0, blocks, sec)


def test_tile_costs_are_visited_kv_tiles_plus_the_fixed_cost():
    assert tile_costs(4, heads=2) == [5.0, 5.0, 4.0, 4.0, 3.0, 3.0, 2.0, 2.0]
    assert tile_costs(4, heads=1, longest_first=False) == [2.0, 3.0, 4.0, 5.0]
    assert tile_costs(3, heads=2, causal=False, overhead=0) == [3.0] * 6
    with pytest.raises(FlashsimError):
        tile_costs(0)


def _brute_force_makespan(costs, ctas):
    best = math.inf

    def go(i, loads):
        nonlocal best
        if max(loads) >= best:
            return
        if i == len(costs):
            best = max(loads)
            return
        for p in range(ctas):
            loads[p] += costs[i]
            go(i + 1, loads)
            loads[p] -= costs[i]

    go(0, [0.0] * ctas)
    return best


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 20), min_size=1, max_size=8), st.integers(1, 4))
def test_deal_rules_against_the_optimum(costs, ctas):
    best = _brute_force_makespan(sorted(costs, reverse=True), ctas)
    for rule in RULES:
        d = deal(costs, ctas, rule)
        assert sorted(t for ts in d["tiles"] for t in ts) == list(range(len(costs)))   # every tile once
        assert d["loads"] == [sum(costs[t] for t in ts) for ts in d["tiles"]]
        assert d["makespan"] >= best - 1e-9 and d["bound"] <= best + 1e-9
    lpt = deal(costs, ctas, "lpt")["makespan"]
    assert lpt <= (4 / 3 - 1 / (3 * ctas)) * best + 1e-9                          # Graham's bound for LPT
    assert deal(costs, ctas, "stride")["tiles"][0] == list(range(0, len(costs), ctas))


def test_deal_says_what_the_chapter_says():
    for ctas in (4, 6, 8):
        short, long_ = tile_costs(16, heads=2, longest_first=False), tile_costs(16, heads=2)
        stride = deal(short, ctas, "stride")["makespan"]
        assert deal(long_, ctas, "stride")["makespan"] == stride                  # "whichever way the list runs"
        assert deal(short, ctas, "greedy")["makespan"] == stride                  # "does no better"
        lpt = deal(short, ctas, "lpt")
        assert deal(long_, ctas, "greedy")["makespan"] == lpt["makespan"] < stride
        assert lpt["makespan"] <= lpt["bound"] + 1.0                              # "meets or nearly meets"
    flat = tile_costs(8, heads=3, causal=False)
    assert len({deal(flat, 5, rule)["makespan"] for rule in RULES}) == 1          # "the three rules agree"
    with pytest.raises(FlashsimError):
        deal([1, 2], 2, "random")
    with pytest.raises(FlashsimError):
        deal([1, float("nan")], 2)


# --- the recorded runs and the figure ------------------------------------------------------------------------------

def test_gluon_run_is_recorded_and_read_exactly():
    results = runs.load_gluon()
    raw = json.loads(GLUON.read_text())
    assert results["source"] == result_source("gluon_fwd_h200") and len(results["rows"]) == len(raw["rows"]) == 32
    assert results["device"] == raw["versions"]["gpu"] and results["rounds"] == 5
    assert runs.recorded_on(results) == f"{raw['versions']['gpu']}, {raw['date_utc'][:10]}"
    for r, one in zip(results["rows"], raw["rows"]):
        assert r["ms"]["gluon"] == one["gluon_fwd_ms"] and r["tflops"]["cudnn"] == one["cudnn_fwd_tflops"]
        # the ratio the chapter plots is the run's own: the median of the per-round ratios
        assert runs.speed_ratio(r, "gluon", "cudnn") == pytest.approx(one["gluon_fwd_vs_cudnn"], rel=1e-12)
    c = results["checks"]
    assert c["passed"] == c["total"] > 0 and c["bwd_passed"] == c["bwd_total"] > 0


def test_speed_vs_cudnn_is_one_figure_of_every_row():
    data = tables.speed_vs_cudnn()
    raw = json.loads(GLUON.read_text())
    assert data["label"] == f"{raw['versions']['gpu']}, {raw['date_utc'][:10]}"
    assert [(g["d"], g["causal"]) for g in data["groups"]] == [(64, False), (64, True), (128, False), (128, True)]
    assert sum(len(g["rows"]) for g in data["groups"]) == 32
    ratios = {k: [r["ratio"][k] for g in data["groups"] for r in g["rows"]] for k in ("flash", "triton", "gluon")}
    # what the text says: FlashAttention-2 far below; Triton furthest behind at d = 128; Gluon level with cuDNN
    assert max(ratios["flash"]) < 0.7
    t64 = [r["ratio"]["triton"] for g in data["groups"] if g["d"] == 64 for r in g["rows"]]
    t128 = [r["ratio"]["triton"] for g in data["groups"] if g["d"] == 128 for r in g["rows"]]
    assert max(t128) < min(t64)
    assert min(ratios["gluon"]) > 0.9 and max(ratios["gluon"]) < 1.15
    assert sum(lo < 1 < hi for g in data["groups"] for r in g["rows"] for lo, hi in [r["range"]["gluon"]]) >= 10
    fig = f.plot_speed_vs_cudnn(data)
    assert len(fig.axes) == 4 and data["label"] in fig._suptitle.get_text()
    assert len(f.plot_speed_vs_cudnn({}).axes) == 1                      # nothing recorded: a one-line figure
    # "2,048 query tiles for 132 SMs, 15.5 each" (d = 128 without a mask)
    r = runs.gluon_rows(d=128, causal=False)[0]
    assert r["batch"] * r["heads"] * r["n"] // 128 == 2048 and round(2048 / 132, 1) == 15.5
    assert runs.load_gluon()["configs"][(128, False)]["NC"] * 64 == 128


def test_gluon_headline_is_the_runs_own_count():
    h = tables.gluon_headline()
    fwd, bwd = h["forward"]["vs_cudnn"], h["backward"]["vs_cudnn"]
    raw = json.loads(GLUON.read_text())["rows"]
    assert fwd["rows"] == 32 and fwd["met"] == sum(r["gluon_fwd_vs_cudnn"] >= 1.0 for r in raw)
    assert bwd["met"] == sum(r["gluon_vs_cudnn"] >= 0.9 for r in json.loads(GLUON_BWD.read_text())["rows"])
    text = tables.gluon_headline_text("forward", h)
    assert f"{fwd['met']} of the 32 rows" in text
    assert "32 rows" in tables.gluon_headline_text("backward", h)
    with pytest.raises(FlashsimError):
        tables.gluon_headline_text("takeaway", h)


def test_tuning_summary_is_still_read():
    """Other code (the wheel test, gluon_io's Triton blocks) reads the tuning sweep through this chapter."""
    from flashsim.kernels._common import TUNED_H200
    summary = runs.tuning_summary(TUNE)
    assert {(r["kernel"], r["d"], r["causal"]) for r in summary} == {
        (k, d, c) for k in ("fwd", "dkdv", "dq") for d in (64, 128) for c in (False, True)}
    raw = json.loads(TUNE.read_text())["results"]
    for r in summary:
        mine = [x for x in raw if (x["kernel"], x["d"], x["causal"]) == (r["kernel"], r["d"], r["causal"])]
        assert r["pointer_ms"] == min(x["ms"] for x in mine if not x["tma"])
        assert r["tma_ms"] == min(x["ms"] for x in mine if x["tma"])
        name = {"fwd": "flash_fwd", "dkdv": "flash_bwd_dkdv", "dq": "flash_bwd_dq"}[r["kernel"]]
        assert r["tuned_config"] == TUNED_H200[(name, r["d"], r["causal"])]
    assert runs.config_label((64, 128, 4, 2)) == "64×128 w4 s2" and runs.config_label(None) == "—"


def test_loaders_with_unusable_files(tmp_path, capsys):
    assert runs.load_gluon(tmp_path / "nothing.json") is None
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert runs.load_tuning(bad) is None and runs.tuning_summary(bad) == []
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"rows": []}))
    assert runs.load_gluon_backward(empty) is None
    assert capsys.readouterr().out.count("nothing to show") == 4


# --- the kernel view of the warp-specialized forward ---------------------------------------------------------------

@pytest.mark.parametrize("n,d,causal", [(4096, 128, False), (2048, 64, False), (4096, 64, True), (1000, 128, True),
                                        (129, 64, False)])
def test_gluon_io_is_the_flash_forward_kernel_view_with_its_blocks(n, d, causal):
    cfg = runs.load_gluon()["configs"][(d, causal)]
    io = tables.gluon_io(n, d, causal, batch=2, heads=3, triton_blocks=(64, 64))
    bm = cfg["NC"] * 64
    (want,) = kernel_io("flash_fwd", n, d, bm, 128, causal=causal, batch=2, heads=3).per_tensor().values()
    assert io["gluon"] == want and io["block_m"] == bm and io["block_n"] == 128
    nd = 2 * 3 * n * d * 2
    assert io["gluon"]["loads"]["Q"] == nd and io["gluon"]["stores"]["O"] == nd
    if not causal:
        assert io["kv_reads"] == math.ceil(n / bm)                      # K, V once per query tile
    for t in ("Q", "K", "V"):
        assert io["box_bytes"][t] >= io["gluon"]["loads"][t]          # whole TMA boxes, never fewer
    assert (io["box_bytes"]["Q"] > io["gluon"]["loads"]["Q"]) == (n % bm != 0)
    tiles = 2 * 3 * math.ceil(n / bm)
    assert io["prefetch_bytes"] == min(132, tiles) * (bm + 128) * d * 2
    assert io["floor"]["loads"]["K"] == nd                             # every byte once


def test_gluon_io_refuses_what_the_kernel_does_not_cover():
    with pytest.raises(FlashsimError, match="d in"):
        tables.gluon_io(1024, 96)
    with pytest.raises(FlashsimError, match="fp16 or bf16"):
        tables.gluon_io(1024, 64, dtype="fp32")
    table = tables.gluon_io_table(4096, 128, batch=4, heads=16)
    assert len(table.rows) == 6 and "32.0 times" in table.caption


def test_ring_protocol_table():
    ring = tables.ring_protocol_table(stages=3, consumers=3)
    assert {row[0]: row[1] for row in ring.rows}["k_empty[s]"] == 3
    with pytest.raises(FlashsimError):
        tables.ring_protocol_table(stages=0)


# --- dashboards -----------------------------------------------------------------------------------------------------

def test_pipeline_dashboard():
    dash = w.PipelineDashboard(stages=1, consumers=1)
    slow = dash.state["end"]
    dash.update(stages=2)
    assert dash.state["end"] < slow and "per 64 rows" in dash.readout()
    dash.update(consumers=2, pingpong=True)
    assert dash.state["params"] == {"stages": 2, "consumers": 2, "kv_tiles": 6, "load": 1.0, "mma": 1.0,
                                    "softmax": 1.5, "pingpong": True}
    with pytest.raises(FlashsimError):
        dash.update(stages=9)
    assert dash.figure() is not None


def test_schedule_dashboard():
    dash = w.ScheduleDashboard(query_blocks=16, heads=2, ctas=6, rule="stride", order="shortest first")
    assert "makespan 57" in dash.readout()
    dash.update(rule="lpt")
    assert dash.state["makespan"] == 51 and dash.state == deal(dash.costs, 6, "lpt")
    with pytest.raises(FlashsimError):
        dash.update(rule="random")
    assert dash.figure() is not None


def test_speed_dashboard():
    dash = w.GluonSpeedDashboard(dtype="fp16", d=128, causal=False)
    assert [r["n"] for r in dash.current] == [2048, 4096, 8192, 16384]
    assert set(dash.plot_args()["series"]) == {"SDPA cuDNN", "SDPA FlashAttention-2", "course Triton",
                                              "course Gluon"}
    assert runs.recorded_on() in dash.plot_args()["title"]
    with pytest.raises(FlashsimError):
        dash.update(d=96)
    assert f.plot_gluon_speed([1, 2], {"course Gluon": [1.0, None]}) is not None


def test_measure_here_without_hopper_says_why(capsys):
    from flashsim.kernels.gluon import available
    if available()[0]:
        pytest.skip("a Hopper GPU with Gluon is here: measure_here runs for real")
    assert w.measure_here(n=256, d=64) is None
    assert capsys.readouterr().out.strip()


def test_split_files_fit_in_a_head():
    for path in (ROOT / "flashsim" / "course" / "ch14").glob("*.py"):
        assert len(path.read_text().splitlines()) < 500, path.name


# --- the chapter's text ---------------------------------------------------------------------------------------------

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


def _prose() -> str:
    nb = json.loads(NOTEBOOK.read_text())
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def test_chapter_14_is_a_lesson():
    """Issue 25: at most 3,500 words of prose, learning goals, exercises in order, no history of the work."""
    prose = _prose()
    assert len(prose.split()) <= 3500
    assert "**Learning goals**" in prose
    numbers = [m.group(1) for m in re.finditer(r"### Exercise (14\.\d+)", prose)]
    assert numbers == ["14.1", "14.2", "14.3"]
    nb = json.loads(NOTEBOOK.read_text())
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    for name in ("check_ring_slot_phase", "check_lpt_makespan", "check_gluon_kv_bytes", "PipelineDashboard",
                 "ScheduleDashboard", "plot_speed_vs_cudnn"):
        assert name in code, name
    assert len(re.findall(r"plot_speed_vs_cudnn|GluonSpeedDashboard|gluon_speed_table", code)) == 1
    for stale in ("committed kernel", "first version", "the run shown here", "predates", "ablation", "was tried",
                  "nvidia-h", "lent", "benchmarks/", "recorded run", "version of the kernel"):
        assert stale not in prose.lower(), stale
    for stub in re.findall(r'raise NotImplementedError\("([^"]+)"\)', code):
        assert len(stub.split()) >= 5                                     # one sentence saying what to write


@pytest.mark.parametrize("B,H,N,d,causal", [(4, 16, 4096, 128, False), (2, 32, 8192, 64, True), (1, 8, 2048, 64, False),
                                            (2, 16, 3001, 128, True), (1, 8, 1000, 64, False)])
def test_the_two_gluon_forward_byte_models_agree(B, H, N, d, causal):
    """Chapter 14's table (kernel view + TMA boxes + the CTAs' extra Q and K_0) and flashsim.measure.gluon_io (the
    boxes each CTA really copies) count the same TMA bytes; where N is ragged they differ only by the rows past the
    tensor's end, which the chapter counts as copied (the box's zero fill) and the TMA unit does not fetch."""
    from flashsim.course.ch14.tables import gluon_io
    from flashsim.measure.gluon_io import forward_io
    from flashsim.model.hardware import get_device
    table = gluon_io(N, d, causal, B, H, "fp16", ctas=get_device("h200").num_sms)
    (launch,) = forward_io(B, H, N, d, "fp16", causal, "h200", dram=False)
    chapter = sum(table["box_bytes"].values()) + table["prefetch_bytes"]
    if N % table["block_m"] == 0 and N % table["block_n"] == 0:
        assert chapter == launch.tma_load_bytes
    else:
        assert 0 < chapter - launch.tma_load_bytes < 0.01 * launch.tma_load_bytes
