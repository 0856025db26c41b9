"""benchmarks/attention_speed.py at tiny sizes (interpreter, CPU): the grid, FLOPs, table, JSON and figure logic.

No speed is asserted: timings here come from a stubbed timer or the interpreter and mean nothing.
"""
import importlib.util
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def speed():
    spec = importlib.util.spec_from_file_location("attention_speed", os.path.join(ROOT, "benchmarks",
                                                                                  "attention_speed.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_grid_is_the_issues(speed):
    rows = speed.make_grid()
    assert len(rows) == 2 * 2 * 2 * 2 * 5
    assert {r["n"] for r in rows} == {1024, 2048, 4096, 8192, 16384}
    assert all(r["batch"] * r["n"] == 16384 and r["heads"] * r["d"] == 2048 for r in rows)
    assert rows[0]["dtype"] == "float16" and rows[-1]["dtype"] == "bfloat16"     # fp16 first: priority order
    quick = speed.make_grid(quick=True)
    assert {r["dtype"] for r in quick} == {"float16"} and len(quick) == 2 * 2 * 2 * 3


def test_flops_fa2_convention(speed):
    assert speed.flops("fwd", 2, 3, 128, 64, False) == 4 * 2 * 3 * 128 ** 2 * 64
    assert speed.flops("fwd", 2, 3, 128, 64, True) == 2 * 2 * 3 * 128 ** 2 * 64
    assert speed.flops("bwd", 2, 3, 128, 64, False) == 2.5 * 4 * 2 * 3 * 128 ** 2 * 64
    assert speed.flops("bwd", 1, 1, 100, 16, True) == 2.5 * 0.5 * 4 * 100 ** 2 * 16


def test_rows_check_time_and_record(speed, tmp_path):
    import flashsim.kernels as K
    if not K.INTERPRETER:
        pytest.skip("checks the interpreter's rows (which implementations answer on a CPU, in the stub timer's "
                    "order); on a GPU benchmarks/attention_speed.py itself times the rows")
    calls = []

    def timer(fn):                     # stubbed timer: run once, report fixed ms per implementation
        fn()
        calls.append(1)
        return {1: 2.0, 2: 1.0, 3: 4.0, 4: 8.0, 5: 16.0}[len(calls) % 5 or 5]

    rows = speed.make_grid(dtypes=("float16",), ns=(32, 64), ds=(16,), tokens=128, width=32)
    rows = [r for r in rows if r["n"] == 64 or r["causal"]][:3] + [r for r in rows if r["mode"] == "bwd"][-1:]
    out = []
    for r in rows:
        calls.clear()
        res = speed.time_row(r, timer=timer, naive_max_n=64)
        out.append(res)
        assert res["check"]["pass"], res["check"]                    # ours within 2x torch's error vs float64
        assert "ours" in res["ms"] and "naive" in res["ms"]          # cuDNN etc. absent on CPU: recorded errors
        assert res["ms"]["ours"] == 2.0
        assert res["ours_is"] == "ours_triton" and "ours_gluon" in res["errors"]   # no Hopper here: recorded
        assert res["tflops"]["ours"] == pytest.approx(res["flops"] / 2.0 / 1e9)
        if "flash" in res["ms"]:                                     # torch CPU SDPA answers the flash request
            assert res["ratio"]["flash"] == pytest.approx(res["ms"]["flash"] / 2.0)
        assert res["targets"] == {}                                  # N < 2048: no target applies
    if out[-1]["mode"] == "bwd":
        assert {"o", "dq", "dk", "dv"} <= set(out[-1]["check"]["ours"])
    text = speed.table(out)
    assert len(text.splitlines()) == 2 + len(out)
    result = {"versions": speed.versions("pytest"), "rows": out, "skipped": [], "complete": True,
              "tflops_convention": "x"}
    path = tmp_path / "attention_speed_test.json"
    speed.save(result, str(path))
    back = json.loads(path.read_text())
    md = speed.markdown(back, path.name)
    assert md.count("\n| fwd") + md.count("\n| bwd") == len(out)
    assert "pytest" in md


def test_verdicts_and_plot_only(speed, tmp_path):
    base = dict(dtype="float16", d=64, causal=False, batch=4, heads=32, check={"pass": True}, errors={})
    rows = [dict(base, mode="fwd", n=4096, ms={"ours": 1.0, "flash": 1.2, "cudnn": 0.8}),
            dict(base, mode="bwd", n=4096, ms={"ours": 1.0, "flash": 1.05}),
            dict(base, mode="fwd", n=1024, ms={"ours": 1.0, "flash": 0.5})]
    for r in rows:
        r["flops"] = speed.flops(r["mode"], 4, 32, r["n"], 64, False)
        r["tflops"] = {k: r["flops"] / v / 1e9 for k, v in r["ms"].items()}
        speed.add_verdicts(r)
    assert rows[0]["targets"]["flash"]["met"] and not rows[0]["targets"]["cudnn"]["met"]   # 1.2 >= 1.1; 0.8 < 0.9
    assert rows[1]["targets"] == {"flash": {"need": 1.1, "got": pytest.approx(1.05), "met": False}}
    assert rows[2]["targets"] == {}
    result = {"versions": {"gpu": "test", "torch": "x", "triton": "y", "date_utc": "2026-11-29"}, "rows": rows,
              "complete": True, "tflops_convention": "x"}
    src = tmp_path / "r.json"
    src.write_text(json.dumps(result))
    fig, md = tmp_path / "f.png", tmp_path / "r.md"
    speed.main(["--plot-only", str(src), "--figure", str(fig), "--markdown", str(md)])
    assert fig.stat().st_size > 10_000
    text = md.read_text()
    assert "MISS by 18%" in text or "MISS by 11%" in text


def test_ours_is_the_faster_course_kernel_and_a_wrong_one_fails_the_row(speed):
    def row(gluon_ok, gluon_ms=1.0):
        check = {"ours_triton": {"o": 1e-3, "ok": True}, "ours_gluon": {"o": 1e-3, "ok": gluon_ok}}
        return {"check": check, "ms": {"ours_triton": 2.0, "ours_gluon": gluon_ms}}
    r = speed.choose_ours(row(True))
    assert r["ours_is"] == "ours_gluon" and r["ms"]["ours"] == 1.0 and r["check"]["pass"]
    r = speed.choose_ours(row(True, gluon_ms=3.0))
    assert r["ours_is"] == "ours_triton" and r["ms"]["ours"] == 2.0 and r["check"]["pass"]
    r = speed.choose_ours(row(False))                  # the faster kernel is wrong: never chosen, and the row fails
    assert r["ours_is"] == "ours_triton" and not r["check"]["pass"]
    r = speed.choose_ours({"check": {"ours_triton": {"o": 1e-3, "ok": True}, "ours_gluon": {"error": "no Hopper"}},
                           "ms": {"ours_triton": 2.0}})
    assert r["ours_is"] == "ours_triton" and r["check"]["pass"]       # a kernel that cannot run here is no failure
