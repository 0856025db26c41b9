"""benchmarks/gluon_bench/stalls.py: the working warps' stall samples of a launch, with the warps parked at the
kernel's closing barrier set apart (a source page as ncu writes it, made up here)."""
import csv

import pytest

from benchmarks.gluon_bench import stalls

HEADER = ["Address", "Source", stalls.SAMPLES, "# Samples", "stall_barrier", "stall_long_sb", "stall_short_sb",
          "stall_barrier (Not Issued)"]
#: (SASS, barrier, long scoreboard, short scoreboard) samples
PAGE = [("@!P0  BRA 0x10", 0, 0, 0),
        ("BAR.SYNC.DEFER_BLOCKING 0x1", 0, 0, 0),
        ("BAR.SYNC.DEFER_BLOCKING 0x1", 2, 0, 0),       # a second closing barrier: still the idle warps
        ("NOP", 100, 0, 0),                             # three idle warps parked for the whole launch
        ("HGMMA.64x64x16.F32 R152, gdesc[UR4], RZ", 0, 0, 0),
        ("WARPGROUP.DEPBAR.LE gsb0, 0x0", 30, 0, 0),
        ("STS.64 [R3], R182", 0, 0, 0),
        ("MEMBAR.ALL.CTA", 0, 0, 0),
        ("FENCE.VIEW.ASYNC.S", 0, 50, 0),
        ("BAR.SYNC.DEFER_BLOCKING 0x0, 0x100", 8, 0, 0),   # the compute warps' own barrier: not idle
        ("FMUL R23, R16, 1.44", 0, 0, 12)]


def write_page(path, page=PAGE):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Kernel Name", "attn_bwd_sm90"])
        w.writerow(HEADER)
        for k, (sass, bar, lsb, ssb) in enumerate(page):
            w.writerow([hex(k * 16), f"      {sass}", bar + lsb + ssb, bar + lsb + ssb, bar, lsb, ssb, bar])
    return str(path)


def test_idle_warps_are_set_apart_and_the_rest_is_shared_by_reason(tmp_path):
    ins = stalls.load(write_page(tmp_path / "src.csv"))
    assert len(ins) == len(PAGE) and ins[3]["reasons"] == {"barrier": 100, "long_sb": 0, "short_sb": 0}
    assert stalls.idle(ins) == [False, False, True, True, False, False, False, False, False, False, False]
    s = stalls.summary(ins, top=2)
    assert s["samples"] == 202 and s["idle_share"] == pytest.approx(102 / 202)
    assert dict(s["reasons"]) == pytest.approx({"long_sb": 0.5, "barrier": 0.38, "short_sb": 0.12})
    assert s["top"]["barrier"][0][:2] == (pytest.approx(0.30), "WARPGROUP.DEPBAR.LE gsb0, 0x0")
    assert s["top"]["long_sb"][0][2] == ["STS.64 [R3], R182", "MEMBAR.ALL.CTA"]
    text = stalls.report(s)
    assert "50.5% are idle warps" in text and "long_sb 50.0%" in text


def test_not_a_source_page_is_a_clear_error(tmp_path):
    bad = tmp_path / "details.csv"
    bad.write_text('"ID","Kernel Name","Metric Name"\n"0","k","Duration"\n')
    with pytest.raises(ValueError, match="--page source --csv"):
        stalls.load(str(bad))
    with pytest.raises(ValueError, match="no instructions"):
        stalls.summary([])


def test_command_line(tmp_path, capsys):
    assert stalls.main([write_page(tmp_path / "src.csv"), "--top", "1"]) == 0
    assert "idle warps at the closing barrier" in capsys.readouterr().out


RAW_HEAD = ["ID", "Kernel Name", "device__attribute_multiprocessor_count", "gpu__time_duration.sum",
            "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
            "smsp__average_warps_issue_stalled_selected_per_issue_active.ratio",
            "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio",
            "smsp__cycles_active.avg", "smsp__inst_executed.sum"]
#: (kernel, SMs, ns, barrier, selected, wait, cycles per SMSP, warp instructions), as ncu's raw page writes them
RAW = [("attn_bwd_sm90", "132", "5,631,392", "4.53", "1", "1.67", "9,818,797.51", "1,246,020,388"),
       ("kernel_cutlass_kernel_flash_attncuteflash_bwd_pre", "132", "92,288", "0", "1", "0.5", "172,123", "11,497,472"),
       ("kernel_cutlass_kernel_flash_attncuteflash_bwd_main", "132", "4,755,264", "1.64", "1", "0.70", "8,014,798",
        "1,388,709,868")]


def write_raw(path, rows=RAW):
    with open(path, "w", newline="") as f:
        w = csv.writer(f, quoting=csv.QUOTE_ALL)
        w.writerow(RAW_HEAD)
        w.writerow(["", "", "", "ns", "", "", "", "cycle", "inst"])
        for k, r in enumerate(rows):
            w.writerow([str(k), *r])
    return str(path)


def test_launch_stalls_weigh_each_reason_by_the_instructions_and_set_idle_warps_apart(tmp_path):
    path = write_raw(tmp_path / "raw.csv")
    ours, fa4 = stalls.launch_stalls(path, {"attn_bwd_sm90": 3}, min_ms=0.5)   # FA4's short pre-pass left out
    assert ours["warp_instructions"] == 1_246_020_388 and ours["time_ms"] == pytest.approx(5.631392)
    assert "selected" not in ours["gcycles"]
    assert ours["gcycles"]["wait"] == pytest.approx(1.67 * 1.246020388)
    parked = 3 * 132 * 9_818_797.51 / 1e9                    # three warps per SM for the whole launch
    assert ours["gcycles"]["barrier"] == pytest.approx(4.53 * 1.246020388 - parked)
    assert fa4["idle_warps"] == 0 and fa4["gcycles"]["barrier"] == pytest.approx(1.64 * 1.388709868)
    assert list(ours["gcycles"]) == ["wait", "barrier"]      # largest first
    assert len(stalls.launch_stalls(path)) == 3
    text = stalls.launch_report([ours, fa4])
    assert "3 idle warps off" in text and text.splitlines()[1].startswith("barrier")   # the larger sum first


def test_launch_stalls_name_what_is_missing(tmp_path):
    src = write_page(tmp_path / "src.csv")
    with pytest.raises(ValueError, match="--page raw"):
        stalls.launch_stalls(src)
    bare = tmp_path / "bare.csv"
    bare.write_text('"ID","Kernel Name","gpu__time_duration.sum"\n"","","ns"\n"0","k","10"\n')
    with pytest.raises(ValueError, match="stall"):
        stalls.launch_stalls(str(bare))
    with pytest.raises(SystemExit):
        stalls.main(["--raw", str(bare), "--idle", "attn_bwd_sm90"])


def test_launch_stalls_ask_for_base_units_when_the_time_is_not_in_ns(tmp_path):
    path = tmp_path / "us.csv"
    write_raw(path)
    path.write_text(path.read_text().replace('"ns"', '"usecond"', 1))
    with pytest.raises(ValueError, match="--print-units base"):
        stalls.launch_stalls(str(path))
