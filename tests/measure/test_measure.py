"""flashsim.measure: count_io equals the kernel view exactly in the interpreter; hooks restored; CLI; ncu parsing."""
import argparse
import json

import pytest

import flashsim.kernels as K
from flashsim.errors import FlashsimError
from flashsim.model.kernel_io import KERNELS, kernel_io
from flashsim.measure.ncu import _parse_ncu_csv
from flashsim.measure import (IOCount, add_measure_arguments, count_io, kernel_runner,
                              measure_cli_result, ncu_profile, run_measure)

pytestmark = pytest.mark.skipif(not K.INTERPRETER, reason="count_io needs the interpreter (a CUDA GPU is present)")

# (n, d, block_m, block_n, causal, dtype): ragged N, padded d=80, causal, unequal blocks
CONFIGS = [
    (97, 80, 32, 16, True, "fp16"),
    (130, 16, 16, 32, False, "fp32"),
    (64, 64, 32, 32, True, "fp32"),
    (100, 24, 32, 32, False, "fp16"),
]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("n,d,bm,bn,causal,dtype", CONFIGS)
def test_count_io_equals_kernel_view_exactly(kernel, n, d, bm, bn, causal, dtype):
    measured = count_io(kernel_runner(kernel, n, d, bm, bn, causal, dtype, batch=1, heads=2))
    sim = kernel_io(kernel, n, d, bm, bn, causal, dtype, batch=1, heads=2)
    assert measured.load_bytes == sim.load_bytes
    assert measured.store_bytes == sim.store_bytes
    assert measured.per_tensor() == sim.per_tensor()          # per launch, per tensor
    assert [L["name"] for L in measured.launches] == [L.name for L in sim.launches]


@pytest.mark.parametrize("causal,expected", [(False, 557_056), (True, 327_680)])
def test_issue_example_flash_fwd_n256(causal, expected):
    measured = count_io(kernel_runner("flash_fwd", 256, 64, 32, 32, causal, "fp16"))
    assert measured.load_bytes == expected == kernel_io("flash_fwd", 256, 64, 32, 32, causal, "fp16").load_bytes
    assert measured.store_bytes == 256 * 64 * 2 + 256 * 4       # O once, LSE (fp32) once


def test_count_io_odd_1025():
    measured = count_io(kernel_runner("flash_fwd", 1025, 16, 64, 64, True, "fp16"))
    sim = kernel_io("flash_fwd", 1025, 16, 64, 64, True, "fp16")
    assert (measured.load_bytes, measured.store_bytes) == (sim.load_bytes, sim.store_bytes)


def test_hooks_restored_after_success_and_error():
    from triton.runtime.interpreter import GridExecutor, InterpreterBuilder
    names = ("create_masked_load", "create_masked_store", "create_load", "create_store")
    before = {n: InterpreterBuilder.__dict__[n] for n in names}
    call = GridExecutor.__dict__["__call__"]
    count_io(kernel_runner("online_softmax", 20, 1, 16, 16))
    with pytest.raises(FlashsimError):
        count_io(lambda: K.flash_forward(*[__import__("torch").randn(1, 1, 8, 300)] * 3))

    def boom():
        raise RuntimeError("inside")
    with pytest.raises(RuntimeError):
        count_io(boom)
    assert {n: InterpreterBuilder.__dict__[n] for n in names} == before
    assert GridExecutor.__dict__["__call__"] is call


def test_count_io_returns_result_and_needs_interpreter(monkeypatch):
    c = count_io(lambda: 42)
    assert isinstance(c, IOCount) and c.result == 42 and c.load_bytes == 0
    monkeypatch.setattr("flashsim.measure.interp.interpreting", lambda: False)
    with pytest.raises(FlashsimError, match="interpreter"):
        count_io(lambda: None)


def test_measure_cli_result_and_run_measure(capsys):
    res = measure_cli_result("flash_fwd", 64, 16, 32, 32, True, "fp16")
    assert res["backend"] == "interpreter"
    assert res["measured_load_bytes"] == res["simulated_load_bytes"]
    assert res["measured_store_bytes"] == res["simulated_store_bytes"]
    p = argparse.ArgumentParser()
    add_measure_arguments(p)
    args = p.parse_args("--kernel naive --n 40 --d 16 --block-m 16 --block-n 16 --causal --json".split())
    assert run_measure(args) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    for key in ("backend", "measured_load_bytes", "measured_store_bytes", "simulated_load_bytes",
                "simulated_store_bytes"):
        assert key in out
    assert out["measured_load_bytes"] == out["simulated_load_bytes"]


def test_unknown_kernel():
    with pytest.raises(FlashsimError, match="unknown kernel"):
        measure_cli_result("flash3", 64, 16, 32, 32)


NCU_CSV = '''==PROF== Connected to process 1
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","python","h","_flash_fwd_kernel","1","7","(128, 1, 1)","(8, 4, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","1,048,576"
"0","1","python","h","_flash_fwd_kernel","1","7","(128, 1, 1)","(8, 4, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","12,345"
"1","1","python","h","_bwd_dq","1","7","(128, 1, 1)","(8, 4, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","byte","2048"
'''


def test_parse_ncu_csv():
    rows = _parse_ncu_csv(NCU_CSV)
    assert [r["kernel"] for r in rows] == ["_flash_fwd_kernel", "_bwd_dq"]
    assert rows[0]["dram__bytes_read.sum"] == 1048576.0 and rows[0]["gpu__time_duration.sum"] == 12345.0


def test_ncu_missing_falls_back_to_timing(monkeypatch, capsys):
    monkeypatch.setattr("shutil.which", lambda name: None)
    monkeypatch.setattr("os.path.exists", lambda p: False)
    res = ncu_profile("flash_fwd", 64, 16, 32, 32)
    assert res["backend"] == "timing" and res["duration_ms"] > 0 and res["simulated_dram_bytes"] > 0
    lines = [l for l in capsys.readouterr().out.splitlines() if "ncu" in l]
    assert len(lines) == 1 and "not found" in lines[0]
