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
