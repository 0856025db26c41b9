"""flashsim.measure.ncu: the ncu command line built, its CSV read back per launch, and clear errors (fake ncu)."""
import os
import stat
import sys

import pytest

from flashsim.errors import FlashsimError
from flashsim.measure.ncu import REQUIRED_METRICS, ncu_profile_script

CSV = '''==PROF== Connected to process 1
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","python","h","_k","1","7","(128, 1, 1)","(8, 4, 1)","0","9.0","s","dram__bytes_read.sum","byte","1,048,576"
"0","1","python","h","_k","1","7","(128, 1, 1)","(8, 4, 1)","0","9.0","s","l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum","Kbyte","4"
"0","1","python","h","_k","1","7","(128, 1, 1)","(8, 4, 1)","0","9.0","s","l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum","byte","512"
"1","1","python","h","_k","1","7","(128, 1, 1)","(8, 4, 1)","0","9.0","s","dram__bytes_write.sum","byte","n/a"
'''


def _fake_ncu(tmp_path, body: str) -> str:
    """An executable standing in for ncu: it records its argv and prints ``body``."""
    exe = tmp_path / "ncu"
    exe.write_text(f"#!{sys.executable}\nimport sys\nopen({str(tmp_path / 'argv')!r}, 'w').write('\\n'.join(sys.argv))\n"
                   f"sys.stdout.write({body!r})\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return str(exe)


def test_ncu_profile_script_reads_each_launch(tmp_path):
    script = tmp_path / "k.py"
    script.write_text("print('hi')\n")
    exe = _fake_ncu(tmp_path, CSV)
    launches = ncu_profile_script(str(script), "^_k$", args=[3], ncu=exe)
    assert [L["kernel"] for L in launches] == ["_k", "_k"]
    assert launches[0]["dram_read_bytes"] == 1048576.0
    assert launches[0]["global_load_bytes"] == 4000.0 and launches[0]["global_store_bytes"] == 512.0
    assert launches[1]["dram_write_bytes"] == 0.0          # "n/a" counts as 0
    argv = (tmp_path / "argv").read_text().splitlines()
    assert argv[argv.index("--clock-control") + 1] == "none"
    assert argv[argv.index("--kernel-name") + 1] == "regex:^_k$"
    assert argv[argv.index("--metrics") + 1] == ",".join(REQUIRED_METRICS)
    assert argv[-2:] == [str(script), "3"] and argv[-3] == sys.executable


def test_ncu_profile_script_errors_name_the_fix(tmp_path):
    script = tmp_path / "k.py"
    script.write_text("pass\n")
    with pytest.raises(FlashsimError, match="no such script"):
        ncu_profile_script(str(tmp_path / "missing.py"), "^_k$", ncu=_fake_ncu(tmp_path, CSV))
    with pytest.raises(FlashsimError, match="ERR_NVGPUCTRPERM"):
        ncu_profile_script(str(script), "^_k$", ncu=_fake_ncu(tmp_path, "==ERROR== ERR_NVGPUCTRPERM\n"))
    with pytest.raises(FlashsimError, match="no metrics"):
        ncu_profile_script(str(script), "^_k$", ncu=_fake_ncu(tmp_path, "nothing\n"))


def test_ncu_profile_script_without_ncu(monkeypatch, tmp_path):
    monkeypatch.setattr("shutil.which", lambda name: None)
    monkeypatch.setattr(os.path, "exists", lambda p: False)
    with pytest.raises(FlashsimError, match="not found on PATH"):
        ncu_profile_script(str(tmp_path / "k.py"), "^_k$")


def _rec(kernel, read, write):
    return {"kernel": kernel, "dram_read_bytes": float(read), "dram_write_bytes": float(write)}


def test_writeback_totals_adds_the_flushs_writes_less_its_own():
    """[F, F, (F, K, F)...]: the second flush measures the flush alone (reads 256, writes 1); a fill before K1
    leaves 30 dirty bytes (the flush before K1 writes them, not K1); K1 leaves 7 dirty bytes (the flush after it
    writes 8), K2 none; the flush after K2 reads 3 more than alone (reported, not added)."""
    from flashsim.measure.ncu import writeback_totals
    seq = [_rec("F", 256, 40), _rec("F", 256, 1), _rec("F", 256, 30), _rec("_a", 100, 20), _rec("F", 256, 8),
           _rec("F", 256, 1), _rec("_b", 50, 5), _rec("F", 259, 1)]
    res = writeback_totals(seq, "F")
    assert res["baseline"] == {"dram_read_bytes": 256.0, "dram_write_bytes": 1.0, "subtracted_write_bytes": 1.0,
                               "first_flush_write_bytes": 40.0}
    a, b = res["launches"]
    assert (a["kernel"], a["window_write_bytes"], a["residue_write_bytes"], a["total_write_bytes"]) == ("_a", 20, 7, 27)
    assert (a["pre_write_bytes"], a["total_read_bytes"]) == (30, 100)
    assert (b["residue_read_bytes"], b["total_read_bytes"], b["total_write_bytes"]) == (3, 50, 5)
    # a run-wide baseline instead of this range's own
    assert writeback_totals(seq, "F", baseline_write_bytes=0.5)["launches"][0]["total_write_bytes"] == 27.5


def test_writeback_totals_with_base_flushes_subtracts_the_adjacent_ones():
    """[F, F, (F, F, K, F, F, F, F)...]: two flushes before K, two after it counted, two after those (on a clean
    L2) subtracted: K1 writes 20 in its window, the two after it 9 + 2, the base ones 1 + 1: total 29."""
    from flashsim.measure.ncu import writeback_totals
    seq = [_rec("F", 256, 40), _rec("F", 256, 1),
           _rec("F", 256, 30), _rec("F", 256, 2), _rec("_a", 100, 20), _rec("F", 257, 9), _rec("F", 256, 2),
           _rec("F", 256, 1), _rec("F", 256, 1),
           _rec("F", 256, 1), _rec("F", 256, 1), _rec("_b", 50, 5), _rec("F", 256, 1), _rec("F", 256, 1),
           _rec("F", 256, 1), _rec("F", 256, 1)]
    res = writeback_totals(seq, "F", before=2, after=2, base=2)
    a, b = res["launches"]
    assert (a["window_write_bytes"], a["residue_write_bytes"], a["own_write_bytes"], a["total_write_bytes"]) == \
        (20, 9, 2, 29)
    assert (a["pre_write_bytes"], a["residue_read_bytes"], b["total_write_bytes"]) == (32, 1, 5)
    assert res["baseline"]["subtracted_write_bytes"] is None
    # only the first flush after K counted, less the first base flush: 20 + 9 - 1
    one = writeback_totals(seq, "F", before=2, after=2, base=2, counted=1)["launches"][0]
    assert (one["residue_write_bytes"], one["total_write_bytes"], one["residue_read_bytes"]) == (8, 28, 1)
    with pytest.raises(FlashsimError, match="expected"):
        writeback_totals(seq[:-1], "F", before=2, after=2, base=2)
    with pytest.raises(FlashsimError, match="base 0 or = after"):
        writeback_totals(seq, "F", before=2, after=2, base=1)


def test_writeback_median_takes_the_median_repeat_per_launch():
    from flashsim.measure.ncu import writeback_median
    blocks = [{"kernel": k, "total_read_bytes": r, "total_write_bytes": w, "own_write_bytes": 1}
              for k, r, w in [("_a", 10, 5), ("_b", 1, 7), ("_a", 12, 9), ("_b", 3, 6), ("_a", 11, 4),
                              ("_b", 2, 8)]]
    a, b = writeback_median(blocks, ["_a", "_b"])
    assert (a["total_write_bytes"], a["total_read_bytes"]) == (5, 11)
    assert (b["total_write_bytes"], b["total_read_bytes"]) == (7, 2)
    assert a["repeats"] == [[10, 5, 1], [12, 9, 1], [11, 4, 1]]
    with pytest.raises(FlashsimError, match="repeated"):
        writeback_median(blocks[:5], ["_a", "_b"])


@pytest.mark.parametrize("names", [["F", "_a", "F"], ["F", "F", "_a", "F"], ["F", "F", "F", "_a", "_b"],
                                   ["F", "F", "F", "F", "F"]])
def test_writeback_totals_refuses_a_sequence_out_of_order(names):
    from flashsim.measure.ncu import writeback_totals
    with pytest.raises(FlashsimError, match="expected"):
        writeback_totals([_rec(n, 1, 1) for n in names], "F")


def test_ncu_launch_sequence_leaves_caches_alone_and_counts_passes(tmp_path):
    from flashsim.measure.ncu import WRITEBACK_METRICS, ncu_launch_sequence
    exe = _fake_ncu(tmp_path, CSV + '==PROF== Profiling "_k" - 0: 0%....50%....100% - 1 pass\n')
    got = ncu_launch_sequence([sys.executable, "x.py"], "^_k$", ncu=exe)
    assert [L["kernel"] for L in got["launches"]] == ["_k", "_k"] and got["passes"] == [1]
    argv = (tmp_path / "argv").read_text().splitlines()
    assert argv[argv.index("--cache-control") + 1] == "none"
    assert argv[argv.index("--profile-from-start") + 1] == "off"
    assert argv[argv.index("--metrics") + 1] == ",".join(WRITEBACK_METRICS)
