"""The flashsim command: traffic, simulate [--check], paper, measure; errors exit 2 without a traceback."""
import json
import subprocess
import sys
import types
from dataclasses import fields

import pytest

from flashsim import cli
from flashsim.model.simulator import Traffic, traffic


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_traffic_json_same_fields_as_api(capsys):
    code, out, _ = run(capsys, "traffic", "--algo", "flash2", "--n", "1024", "--d", "64", "--block-r", "64",
                       "--block-c", "128", "--heads", "4", "--dtype", "bf16", "--causal", "--backward",
                       "--device", "a100", "--sram-bytes", "200000", "--json")
    assert code == 0
    obj = json.loads(out)
    assert list(obj) == [f.name for f in fields(Traffic)]
    t = traffic("flash2", 1024, 64, 64, 128, heads=4, dtype="bf16", causal=True, backward=True, device="a100",
                sram_bytes=200000)
    assert obj == t.as_dict()


def test_traffic_human_output(capsys):
    code, out, _ = run(capsys, "traffic", "--algo", "naive", "--n", "1024", "--d", "64")
    assert code == 0
    assert f"{(3 * 1024 * 64 + 2 * 1024**2) * 2:,} B" in out and "memory-bound" in out
    # readable units, one family: KiB/MiB/GiB and µs/ms, never decimal MB/GB or "e-05 ms"
    assert "4.38 MiB" in out and "SRAM 228 KiB" in out and "µs" in out
    assert " MB" not in out and " GB" not in out and "e-0" not in out


def test_block_and_heads_flags_mean_the_same_in_every_command(capsys):
    base = ["traffic", "--algo", "flash2", "--n", "512", "--d", "64", "--json"]
    a = json.loads(run(capsys, *base, "--block-r", "64", "--block-c", "32", "--batch", "2", "--heads", "3")[1])
    b = json.loads(run(capsys, *base, "--block-m", "64", "--block-n", "32", "--batch", "2", "--heads", "3")[1])
    assert a == b and (a["batch"], a["heads"]) == (2, 3) and (a["block_r"], a["block_c"]) == (64, 32)
    assert a == traffic("flash2", 512, 64, 64, 32, batch=2, heads=3).as_dict()
    code, _, err = run(capsys, *base, "--batch", "0")
    assert code == 2 and "--batch 0" in err
    from flashsim.measure import add_measure_arguments
    import argparse
    p = argparse.ArgumentParser()
    add_measure_arguments(p)
    args = p.parse_args(["--kernel", "flash_fwd", "--n", "64", "--d", "16", "--block-r", "64", "--block-c", "16"])
    assert (args.block_m, args.block_n) == (64, 16)


def test_traffic_eager_options(capsys):
    code, out, _ = run(capsys, "traffic", "--algo", "eager", "--n", "256", "--d", "32", "--eager-ops",
                       "megatron2020", "--dropout-p", "0.1", "--json")
    assert code == 0 and json.loads(out)["eager_ops"] == "megatron2020"


def test_simulate_check_passes(capsys):
    code, out, _ = run(capsys, "simulate", "--algo", "flash1", "--n", "96", "--d", "16", "--dtype", "fp16",
                       "--causal", "--backward", "--check")
    assert code == 0 and "check: ok" in out.replace("  ", " ").replace("  ", " ")


def test_simulate_json(capsys):
    code, out, _ = run(capsys, "simulate", "--algo", "naive", "--n", "64", "--d", "16", "--dtype", "fp32",
                       "--json", "--seed", "4")
    obj = json.loads(out)
    assert code == 0 and obj["ok"] and obj["rel_error"] < 1e-6 and obj["seed"] == 4
    assert set(f.name for f in fields(Traffic)) <= set(obj)


def test_simulate_check_fails_when_error_exceeds_tolerance(capsys, monkeypatch):
    import flashsim.model.simulator as api
    monkeypatch.setattr(api, "tolerance", lambda dtype, plain, rounding_bound=0.0: 0.0)
    code, _, err = run(capsys, "simulate", "--algo", "flash2", "--n", "64", "--d", "16", "--check")
    assert code == 1 and "exceeds" in err
    assert "internal error" not in err


@pytest.mark.parametrize("argv,match", [
    (["traffic", "--n", "0", "--d", "64"], "n=0"),
    (["traffic", "--n", "64", "--d", "-1"], "d=-1"),
    (["traffic", "--n", "64", "--d", "64", "--block-r", "0"], "block_r=0"),
    (["traffic", "--n", "200000", "--d", "64", "--block-c", "100000", "--algo", "flash1"], "SRAM"),
    (["traffic", "--n", "64", "--d", "64", "--device", "v100"], "unknown device"),
    (["traffic", "--n", "64", "--d", "64", "--dtype", "int8"], "unknown dtype"),
    (["traffic", "--n", "64", "--d", "64", "--algo", "flash9"], "unknown algo"),
    (["simulate", "--n", "65536", "--d", "128", "--heads", "64"], "host memory"),
    (["simulate", "--n", "64", "--d", "16", "--algo", "naive", "--dropout-p", "0.1"], "no dropout"),
])
def test_bad_input_prints_error_and_exits_2(capsys, argv, match):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert err.startswith("error: ") and match in err
    assert "Traceback" not in err + out


def test_bad_input_subprocess_no_traceback():
    p = subprocess.run([sys.executable, "-m", "flashsim", "traffic", "--n", "-3", "--d", "64"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.startswith("error: ") and "Traceback" not in p.stderr


def test_python_dash_m_flashsim():
    p = subprocess.run([sys.executable, "-m", "flashsim", "traffic", "--algo", "flash2", "--n", "128", "--d", "32",
                        "--json"], capture_output=True, text=True, check=True)
    assert json.loads(p.stdout)["n"] == 128


def test_paper_subcommand(capsys, monkeypatch):
    import flashsim.model.paper as paper
    monkeypatch.setattr(paper, "fig2_left", lambda l2=True: _fake_left())
    code, out, _ = run(capsys, "paper", "--no-l2")
    assert code == 0
    for gb in ("6.85", "3.56", "1.91", "1.09", "40.3", "4.4"):
        assert gb in out


def _fake_left():
    row = dict(label="x", algo="eager", eager_ops=None, block_r=64, block_c=64, hbm_bytes=1, hbm_gb=36.0,
               gflops=1.0, roofline_ms=1.0, dram_gb=None, paper_gb=40.3, paper_gflops=1, paper_runtime_ms=1,
               rel_diff=-0.1)
    flash = dict(row, algo="flash1", paper_gb=4.4)
    return {"standard": row, "flashattention": flash, "alternatives": []}


def test_measure_delegates_lazily(capsys, monkeypatch):
    calls = {}
    fake = types.ModuleType("flashsim.measure")
    fake.add_measure_arguments = lambda p: p.add_argument("--kernel")
    fake.run_measure = lambda args: calls.setdefault("kernel", args.kernel) and 0
    monkeypatch.setitem(sys.modules, "flashsim.measure", fake)
    code, _, _ = run(capsys, "measure", "--kernel", "flash_fwd")
    assert code == 0 and calls["kernel"] == "flash_fwd"


def test_measure_missing_gives_clear_error(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "flashsim.measure", None)  # import fails
    code, _, err = run(capsys, "measure", "--kernel", "flash_fwd")
    assert code == 2 and "error:" in err and "torch" in err


def test_traffic_does_not_import_torch():
    code = ("import sys; from flashsim.cli import main; main(['traffic', '--n', '64', '--d', '16', '--json']); "
            "assert 'torch' not in sys.modules and 'flashsim.measure' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


# --- issue 13, item 7: no traceback, ever ----------------------------------------------------------------------

def test_negative_seed_is_refused_by_argparse(capsys):
    code, out, err = run(capsys, "simulate", "--n", "64", "--d", "64", "--seed", "-1")
    assert code == 2 and "seed -1 is negative" in err and "Traceback" not in err + out


def test_internal_error_is_one_line_exit_1(capsys, monkeypatch):
    def boom(*a, **k):
        raise ZeroDivisionError("a bug")
    monkeypatch.setattr(cli, "traffic", boom)
    code, _, err = run(capsys, "traffic", "--n", "64", "--d", "16")
    assert code == 1 and err.startswith("error: internal error (ZeroDivisionError: a bug)") and "Traceback" not in err


def test_measure_footprint_counts_s_and_p():
    n, d, bh = 100000, 64, 1
    assert cli.measure_footprint_bytes("naive", n, d) == 4 * n * d * 2 + 2 * n * n * 4
    assert cli.measure_footprint_bytes("flash_bwd", 1024, 64, "fp32", 2, 3) == 8 * 6 * 1024 * 64 * 4 + 2 * 6 * 1024 * 4


def test_measure_huge_naive_refused_before_allocating():
    """`flashsim measure --kernel naive --n 100000 --d 64` (80 GB of S and P) fails at once, exit 2."""
    env = dict(__import__("os").environ, TRITON_INTERPRET="1")
    p = subprocess.run([sys.executable, "-m", "flashsim", "measure", "--kernel", "naive", "--n", "100000", "--d",
                        "64"], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 2 and "GiB" in p.stderr and "smaller --n" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
