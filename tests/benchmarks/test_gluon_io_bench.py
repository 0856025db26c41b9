"""benchmarks/gluon_io: the configurations written down before the run cover what issue 28 asks, ncu's launches
are matched to them, and the report judges synthetic measurements as the criterion says (no GPU)."""
import json

from benchmarks.gluon_io import measure as M
from benchmarks.gluon_io import report as R
from flashsim.measure import gluon_io as GI


def test_the_configurations_cover_the_issue():
    cfgs = M.load_configs()
    assert len(cfgs) >= 8 and len({c["id"] for c in cfgs}) == len(cfgs)
    assert sum(not c.get("already_measured") for c in cfgs) >= 3
    assert {c["kernel"] for c in cfgs} == {"fwd", "bwd"} and {c["d"] for c in cfgs} == {64, 128}
    assert {c["causal"] for c in cfgs} == {False, True} and {c["dtype"] for c in cfgs} == {"fp16", "bf16"}
    ns = {c["N"] for c in cfgs}
    assert min(ns) == 2048 and max(ns) == 16384 and any(n % 2 for n in ns)
    for c in cfgs:                                    # every one has a prediction
        GI.launch_io(c["kernel"], c["B"], c["H"], 64, c["d"], c["dtype"], c["causal"], dram=False)


def _record(name, p, **off):
    rec = {"kernel": name, "global_load_bytes": p["lsu_load_bytes"], "global_store_bytes": p["lsu_store_bytes"],
           "l2_read_bytes_from_sm": p["lsu_load_bytes"] + p["tma_load_bytes"], "l2_write_bytes_from_sm": 0,
           "dram_read_bytes": p["dram_read_bytes"], "dram_write_bytes": p["dram_write_bytes"], "duration_ns": 1e3,
           "raw": {"lts__t_sectors_srcunit_tex_op_red.sum": p["tma_reduce_bytes"] / 32}}
    rec.update(off)
    return rec


def test_matching_and_report_on_synthetic_measurements(tmp_path):
    cfgs = [dict(id="f", kernel="fwd", dtype="fp16", d=64, causal=True, B=1, H=2, N=600),
            dict(id="b", kernel="bwd", dtype="bf16", d=128, causal=False, B=1, H=1, N=301, already_measured=True),
            dict(id="x", kernel="fwd", dtype="fp16", d=128, causal=False, B=1, H=1, N=256)]
    preds = {c["id"]: [L.as_dict() for L in GI.launch_io(c["kernel"], c["B"], c["H"], c["N"], c["d"], c["dtype"],
                                                         c["causal"])] for c in cfgs[:2]}
    fwd = preds["f"][0]
    records = [_record("attn_fwd_sm90", fwd),
               _record("attn_fwd_sm90", fwd)]                          # the backward's setup forward
    records += [_record(p["name"], p) for p in preds["b"]]
    records[-2] = _record("attn_bwd_sm90", preds["b"][1], global_store_bytes=preds["b"][1]["lsu_store_bytes"] + 32,
                          dram_read_bytes=int(preds["b"][1]["dram_read_bytes"] * 1.2) + 2**20)
    done = [{"id": "f", "ran": True, "finite": True}, {"id": "b", "ran": True, "finite": True},
            {"id": "x", "ran": False, "error": "RuntimeError: boom"}]
    rows = M.match(cfgs, records, done)
    assert [("launches" in r) for r in rows] == [True, True, False] and "boom" in rows[2]["error"]
    assert [L["kernel"] for L in rows[1]["launches"]] == list(GI.BWD_LAUNCHES)
    res = R.compare({"info": {}, "rows": rows}, workers=1)
    s = res["summary"]
    assert s["fwd"] == dict(s["fwd"], launches=1, requested_equal=1, dram_ok=1, dram_strict_ok=1)
    assert s["bwd"]["launches"] == 3 and s["bwd"]["requested_equal"] == 2 and s["bwd"]["dram_ok"] == 2
    assert s["all"]["launches_chosen_before"] == 1 and s["all"]["dram_ok_chosen_before"] == 1
    md = R.markdown(res)
    assert "| fwd | 1 | 1 | 1/1 | 1/1 | 1/1 |" in md and "error: RuntimeError: boom" in md
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"info": {}, "rows": rows}))
    assert R.main([str(path), "--workers", "1"]) == 0 and (tmp_path / "m_compared.md").exists()
    # a compared file judged again (--rejudge): the same measurement, the same verdicts under the same model
    again = R.compare(R.measured_of(res), workers=1)
    assert again["summary"] == res["summary"] and again["rows"] == res["rows"]
    assert R.main([str(tmp_path / "m_compared.json"), "--rejudge", "--workers", "1", "--out",
                   str(tmp_path / "r")]) == 0
    assert json.loads((tmp_path / "r.json").read_text())["summary"] == res["summary"]


def test_a_launch_sequence_that_is_not_the_calls_is_an_error_not_a_verdict():
    cfgs = [dict(id="b", kernel="bwd", dtype="fp16", d=64, causal=False, B=1, H=1, N=128)]
    rows = M.match(cfgs, [{"kernel": "attn_fwd_sm90"}, {"kernel": "attn_bwd_sm90"}], [{"id": "b", "ran": True}])
    assert "expected" in rows[0]["error"]
