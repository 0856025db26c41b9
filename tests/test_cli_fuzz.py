"""The flashsim command fuzzed (issue 13, item 7): any argv ends with status 0, 1 or 2 and never a traceback.

Hypothesis builds command lines from the options of ``traffic`` and ``simulate`` with values that are valid, out
of range, huge (N up to 10¹², heads up to 10⁶: refused up front by the budget checks, never allocated) or not
numbers at all, and runs :func:`flashsim.cli.main` in this process. Every case must return 0, 1 or 2, print no
traceback and no "internal error" (the CLI's last-resort message for a bug), and ``--json`` output that is
printed must be strict JSON. The number of cases comes from the hypothesis profile (tests/conftest.py).
"""
import contextlib
import io
import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, strategies as st

from flashsim import cli

INTS = ["0", "-1", "1", "2", "3", "17", "64", "127", "128", "1e3", "abc", "", "3100000000", "10000000000",
        "1000000000000"]
VALUES = {
    "--algo": ["naive", "eager", "flash1", "flash2", "FLASH2", "flash3", ""],
    "--n": INTS,
    "--d": ["1", "16", "59", "64", "128", "0", "-3", "x", "1000000000"],
    "--block-r": ["0", "1", "16", "63", "128", "100000", "-5", "q"],
    "--block-c": ["0", "1", "16", "63", "128", "100000", "-5"],
    "--heads": ["1", "2", "3", "0", "-2", "x", "1000000"],
    "--dtype": ["fp16", "bf16", "fp32", "float16", "int8", ""],
    "--stats-dtype": ["fp16", "bf16", "fp32", "fp64"],
    "--device": ["h200", "a100", "t4", "cpu", "rtx4090", "v100"],
    "--sram-bytes": ["0", "1", "1000", "65536", str(10**30), "-1", "1.5"],
    "--dropout-p": ["0", "0.1", "1", "nan", "inf", "-0.5", "x"],
    "--eager-ops": ["pytorch", "megatron2020", "bogus"],
}
FLAGS = ["--causal", "--backward", "--l2", "--json", "--check"]
SEEDS = ["0", "7", "-1", str(2**70), "x"]


@st.composite
def command_lines(draw):
    cmd = draw(st.sampled_from(["traffic", "simulate"]))
    argv = [cmd]
    # --n and --d are required: usually present (else argparse's own error, status 2)
    for opt in ("--n", "--d"):
        if draw(st.integers(0, 9)):
            argv += [opt, draw(st.sampled_from(VALUES[opt]))]
    for opt in draw(st.lists(st.sampled_from(sorted(set(VALUES) - {"--n", "--d"})), max_size=5, unique=True)):
        argv += [opt, draw(st.sampled_from(VALUES[opt]))]
    argv += draw(st.lists(st.sampled_from(FLAGS), max_size=4, unique=True))
    if cmd == "simulate" and draw(st.booleans()):
        argv += ["--seed", draw(st.sampled_from(SEEDS))]
    if draw(st.integers(0, 19)) == 0:
        argv.insert(draw(st.integers(0, len(argv))), draw(st.sampled_from(["--bogus", "-x", "--", "--n"])))
    if cmd == "simulate" and "--l2" in argv:
        argv.remove("--l2")  # step mode + the L2 model is covered by the model tests; keeps each case fast
    return argv


def _run(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue()


@given(command_lines())
def test_any_command_line_exits_0_1_or_2_without_traceback(argv):
    code, out, err = _run(argv)
    assert code in (0, 1, 2), (argv, code, err)
    assert "Traceback" not in out + err, argv
    assert "internal error" not in err, (argv, err)
    if code == 2:
        assert "error" in err, (argv, err)  # every refusal says why
    if code in (0, 1) and "--json" in argv and out.strip():
        json.loads(out, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(f"non-strict JSON {c}")))


def test_fuzz_reaches_the_refusals():
    """The vocabulary above really produces the cases item 7 names (not only argparse errors)."""
    for argv, want in ((["simulate", "--n", "64", "--d", "64", "--seed", "-1"], "seed"),
                       (["traffic", "--n", "1000000000000", "--d", "64", "--l2"], "L2"),
                       (["simulate", "--n", "1000000000000", "--d", "64"], "count mode")):
        code, _, err = _run(argv)
        assert code == 2 and want in err and "Traceback" not in err, (argv, err)


def test_closed_pipe_ends_quietly():
    """`flashsim traffic ... --json | head -c 10`: the reader is gone before the output is flushed."""
    r, w = os.pipe()
    os.close(r)
    p = subprocess.run([sys.executable, "-m", "flashsim", "traffic", "--n", "4096", "--d", "64", "--json"],
                       stdout=w, stderr=subprocess.PIPE, text=True, timeout=120)
    os.close(w)
    assert p.returncode == 0 and "Traceback" not in p.stderr and "BrokenPipe" not in p.stderr, p.stderr


def test_huge_traffic_subprocess_no_traceback():
    """`flashsim traffic --n 1000000000000 --d 64` is answered exactly (count mode allocates nothing of size N)."""
    p = subprocess.run([sys.executable, "-m", "flashsim", "traffic", "--n", "1000000000000", "--d", "64",
                        "--json"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    obj = json.loads(p.stdout)
    assert obj["flops"] > 0 and obj["arithmetic_intensity"] > 0
