"""The Gluon kernels' measured bytes (benchmarks/gluon_io/measure.py's JSON) against the kernel view and the L2 model
(flashsim.measure.gluon_io), without a GPU: per launch, requested bytes equal (the L1's LSU counters against the
predicted sector bytes), the TMA traffic beside the L2's bytes from the SMs, and DRAM within the criterion
(flashsim.measure.criterion) and within the strict 5 %.

    python benchmarks/gluon_io/report.py MEASURED.json [--out benchmarks/results/gluon_io_<gpu>_<date>]
    python benchmarks/gluon_io/report.py --rejudge COMPARED.json --out ...   # a record, judged by today's model

Writes OUT.json (the measurement with the predictions and verdicts) and OUT.md, and prints the summary.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from benchmarks.fidelity_bench.configs import run_hardware  # noqa: E402
from flashsim.measure import criterion  # noqa: E402
from flashsim.measure import gluon_io as GI  # noqa: E402

MIB = 1 << 20


def predict(args) -> list:
    cfg, hw = args
    return [L.as_dict() for L in GI.launch_io(cfg["kernel"], cfg["B"], cfg["H"], cfg["N"], cfg["d"], cfg["dtype"],
                                              cfg["causal"], hardware=hw)]


def compare_launch(pred: dict, meas: dict) -> dict:
    """One launch: requested bytes equal? L2 bytes from the SMs beside the TMA and LSU prediction; DRAM judged
    both ways (ncu's window of one launch: the model's writes during the launch, ``flush_writes=False``)."""
    raw = meas.get("raw", {})
    red = 32 * float(raw.get("lts__t_sectors_srcunit_tex_op_red.sum", 0) or 0)
    row = {"launch": pred["name"], "pred": pred,
           "meas_load_bytes": int(meas["global_load_bytes"]), "meas_store_bytes": int(meas["global_store_bytes"]),
           "meas_l2_read_from_sm": int(meas.get("l2_read_bytes_from_sm", 0)),
           "meas_l2_write_from_sm": int(meas.get("l2_write_bytes_from_sm", 0)), "meas_l2_red_from_sm": int(red),
           "meas_dram_read_bytes": int(meas["dram_read_bytes"]), "meas_dram_write_bytes": int(meas["dram_write_bytes"]),
           "duration_ns": meas.get("duration_ns")}
    row["requested_equal"] = (row["meas_load_bytes"], row["meas_store_bytes"]) == (pred["lsu_load_bytes"],
                                                                                  pred["lsu_store_bytes"])
    row["l2_read_pred_bytes"] = pred["lsu_load_bytes"] + pred["tma_load_bytes"]
    j = criterion.judge(pred["dram_read_bytes"], pred["dram_write_bytes"], row["meas_dram_read_bytes"],
                        row["meas_dram_write_bytes"])
    row.update(dram_read_ok=j["read_ok"], dram_write_ok=j["write_ok"], dram_ok=j["ok"], dram_strict_ok=j["strict_ok"])
    return row


def compare(measured: dict, workers: int = 4) -> dict:
    """The measurement with predictions and verdicts: {"info", "hardware", "rows": [...], "summary"}."""
    hw = run_hardware(measured.get("info", {}))
    rows = measured["rows"]
    ok = [i for i, r in enumerate(rows) if "launches" in r]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        preds = dict(zip(ok, pool.map(predict, [(rows[i]["config"], hw) for i in ok])))
    out = []
    for i, r in enumerate(rows):
        if "launches" not in r:
            out.append({"config": r["config"], "error": r.get("error")})
            continue
        pred = preds[i]
        by_name = {p["name"]: p for p in pred}
        launches = []
        for m in r["launches"]:
            name = next((n for n in by_name if n in m["kernel"]), None)
            launches.append(compare_launch(by_name[name], m) if name else {"launch": m["kernel"], "error": "no prediction"})
        out.append({"config": r["config"], "finite": r.get("finite"), "launches": launches})
    return {"info": measured.get("info", {}), "hardware": {"name": hw.name, "num_sms": hw.num_sms,
                                                           "l2_bytes": hw.l2_bytes},
            "criterion": criterion.TEXT, "strict": criterion.STRICT_TEXT, "rows": out, "summary": summarize(out)}


def measured_of(compared: dict) -> dict:
    """The measurement inside a compared file (what :func:`compare` took), so that a record is judged again by
    the model as it is now without the device: each launch's ncu counts as measure.py wrote them."""
    rows = []
    for r in compared["rows"]:
        if "launches" not in r:
            rows.append({"config": r["config"], "error": r.get("error")})
            continue
        launches = [{"kernel": L["launch"], "global_load_bytes": L["meas_load_bytes"],
                     "global_store_bytes": L["meas_store_bytes"], "l2_read_bytes_from_sm": L["meas_l2_read_from_sm"],
                     "l2_write_bytes_from_sm": L["meas_l2_write_from_sm"],
                     "raw": {"lts__t_sectors_srcunit_tex_op_red.sum": L["meas_l2_red_from_sm"] / 32},
                     "dram_read_bytes": L["meas_dram_read_bytes"], "dram_write_bytes": L["meas_dram_write_bytes"],
                     "duration_ns": L.get("duration_ns")} for L in r["launches"]]
        rows.append({"config": r["config"], "finite": r.get("finite"), "launches": launches})
    return {"info": compared.get("info", {}), "rows": rows}


def summarize(rows: list) -> dict:
    """Per kernel (fwd, bwd) and in all: launches, requested equal, DRAM within the criterion and strict 5 %;
    the same over the configurations chosen before any was measured (not ``already_measured``) alone."""
    out = {}
    for kernel in ("fwd", "bwd", "all"):
        sel = [(r["config"], L) for r in rows for L in r.get("launches", []) if "dram_ok" in L
               and (kernel == "all" or r["config"]["kernel"] == kernel)]
        pre = [L for c, L in sel if not c.get("already_measured")]
        out[kernel] = {"configs": len({c["id"] for c, _ in sel}), "launches": len(sel),
                       "requested_equal": sum(L["requested_equal"] for _, L in sel),
                       "dram_ok": sum(L["dram_ok"] for _, L in sel),
                       "dram_strict_ok": sum(L["dram_strict_ok"] for _, L in sel),
                       "launches_chosen_before": len(pre), "dram_ok_chosen_before": sum(L["dram_ok"] for L in pre),
                       "configs_chosen_before": len({c["id"] for c, _ in sel if not c.get("already_measured")})}
    return out


def markdown(res: dict) -> str:
    info, s = res["info"], res["summary"]
    lines = [f"# Gluon kernels: kernel view and L2 model vs Nsight Compute on {info.get('gpu')}", "",
             f"- date (UTC): {info.get('date_utc')}; command: `{info.get('command')}`",
             f"- python {info.get('python')}, torch {info.get('torch')}, triton {info.get('triton')}; GPU "
             f"{info.get('gpu')} ({info.get('sms')} SMs, L2 {info.get('l2_bytes')} B), driver {info.get('driver')}",
             f"- predictions: flashsim.measure.gluon_io for {res['hardware']['name']} ({res['hardware']['num_sms']} "
             f"SMs, L2 {res['hardware']['l2_bytes']} B), the L2 model's constants as fitted for the Triton kernels "
             "(none refitted); configurations: benchmarks/gluon_io/configs.json, committed before they were measured",
             f"- DRAM criterion: {res['criterion']}; strict: {res['strict']}; judged on ncu's window of each launch "
             "(caches flushed before it) against the model's writes during the launch", "",
             "| kernel | configs | launches | requested = L1 view | DRAM within the criterion | strict 5 % | "
             "chosen before measured: within the criterion |", "|---|---|---|---|---|---|---|"]
    for k in ("fwd", "bwd", "all"):
        v = s[k]
        lines.append(f"| {k} | {v['configs']} | {v['launches']} | {v['requested_equal']}/{v['launches']} | "
                     f"{v['dram_ok']}/{v['launches']} | {v['dram_strict_ok']}/{v['launches']} | "
                     f"{v['dram_ok_chosen_before']}/{v['launches_chosen_before']} ({v['configs_chosen_before']} "
                     "configs) |")
    lines += ["", "MiB. req = LSU load + store (L1 sectors) predicted / ncu; TMA = predicted TMA loads (+ dQ "
              "reduce-adds) / ncu's L2 reads (reductions) from the SMs; DRAM read and write predicted / ncu.", "",
              "| config | launch | req pred / ncu | equal | TMA ld pred / L2 rd | red pred / L2 red | DRAM read | "
              "DRAM write | ok | strict |", "|---|---|---|---|---|---|---|---|---|---|"]
    mb = lambda x: f"{x / MIB:.2f}"  # noqa: E731
    for r in res["rows"]:
        c = r["config"]
        if "error" in r:
            lines.append(f"| {c['id']} | error: {str(r['error']).strip().splitlines()[-1][:120]} | | | | | | | | |")
            continue
        for L in r["launches"]:
            if "error" in L:
                lines.append(f"| {c['id']} | {L['launch']}: {L['error']} | | | | | | | | |")
                continue
            p = L["pred"]
            lines.append(
                f"| {c['id']}{' (measured before)' if c.get('already_measured') else ''} | {L['launch']} | "
                f"{mb(p['lsu_load_bytes'] + p['lsu_store_bytes'])} / {mb(L['meas_load_bytes'] + L['meas_store_bytes'])} | "
                f"{L['requested_equal']} | {mb(L['l2_read_pred_bytes'])} / {mb(L['meas_l2_read_from_sm'])} | "
                f"{mb(p['tma_reduce_bytes'])} / {mb(L['meas_l2_red_from_sm'])} | {mb(p['dram_read_bytes'])} / "
                f"{mb(L['meas_dram_read_bytes'])} | {mb(p['dram_write_bytes'])} / {mb(L['meas_dram_write_bytes'])} | "
                f"{L['dram_ok']} | {L['dram_strict_ok']} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("measured", help="benchmarks/gluon_io/measure.py's JSON, or with --rejudge a compared one")
    ap.add_argument("--rejudge", action="store_true", help="MEASURED is a compared file (this script's or "
                    "gpu_io_ingest.py's output): predict and judge its measurement again with today's model")
    ap.add_argument("--out", help="path stem of the JSON and markdown to write (default: beside the input, "
                    "_compared)")
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args(argv)
    with open(a.measured) as f:
        data = json.load(f)
    res = compare(measured_of(data) if a.rejudge else data, a.workers)
    stem = a.out or os.path.splitext(a.measured)[0] + "_compared"
    with open(stem + ".json", "w") as f:
        json.dump(res, f, indent=1, default=str)
    with open(stem + ".md", "w") as f:
        f.write(markdown(res))
    print(json.dumps(res["summary"], indent=1))
    print(f"wrote {stem}.json and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
