"""Measurements against the predictions for benchmarks/fidelity_h200.py: the DRAM criterion, one row per launch
(the kernel view's requested bytes and the L2 model's DRAM bytes against ncu's window and the write-back
measurement), a run re-compared with the current model (``--recompare``), the per-kernel summary and several runs
merged into one (``--merge``)."""
from __future__ import annotations

import json
import time
from concurrent.futures import ProcessPoolExecutor

from .configs import KERNELS, MIB, NEWEST_TAG, predict

#: DRAM criterion (issue 13): within 5 %, or within 2 MiB where a launch moves less than 40 MiB
DRAM_REL, DRAM_ABS_BYTES, DRAM_SMALL_BYTES = 0.05, 2 * MIB, 40 * MIB


# --- comparison ----------------------------------------------------------------------------------------------------

def dram_ok(sim: float, meas: float, moved: float) -> bool:
    """The issue's criterion for one launch and one direction."""
    diff = abs(sim - meas)
    return diff <= DRAM_REL * meas or (moved < DRAM_SMALL_BYTES and diff <= DRAM_ABS_BYTES)


def compare(cfg: dict, pred: dict, measured: dict | None, writeback: dict | None = None) -> dict:
    """One row per launch: ncu's requested bytes equal to the kernel view's L1 bytes (and to its element bytes)?
    DRAM within the criterion (the L2 model, and the previous model), in ncu's window of the kernel alone
    (``measured``: the L2 model with dirty lines left in the L2 at the end not counted) and with the write-back
    of its dirty lines (``writeback``, from :func:`measure_writeback`: against the L2 model's
    ``flush_writes=True``, every dirty byte written once)?"""
    rows = []
    by_name = {L["kernel"]: L for L in (measured or {}).get("launches", [])}
    wb_by_name = {L["kernel"]: L for L in (writeback or {}).get("launches", [])}
    for name, p in pred["launches"].items():
        m = by_name.get(name)
        row = {"launch": name, "sim_load_bytes": p["load_bytes"], "sim_store_bytes": p["store_bytes"],
               "sim_l1_load_bytes": p["l1_load_bytes"], "sim_l1_store_bytes": p["l1_store_bytes"],
               "sim_dram_read_bytes": p["dram_read_bytes"], "sim_dram_write_bytes": p["dram_write_bytes"],
               "sim_dram_write_flushed_bytes": p.get("dram_write_flushed_bytes"),
               "alt_dram_read_bytes": p["alt_dram_read_bytes"], "alt_dram_write_bytes": p["alt_dram_write_bytes"]}
        w = wb_by_name.get(name)
        if w is not None and p.get("dram_write_flushed_bytes") is not None:
            moved = w["total_read_bytes"] + w["total_write_bytes"]
            row.update(wb_window_read_bytes=int(w["window_read_bytes"]),
                       wb_window_write_bytes=int(w["window_write_bytes"]),
                       wb_residue_write_bytes=int(w["residue_write_bytes"]),
                       wb_residue_read_bytes=int(w["residue_read_bytes"]),
                       wb_total_read_bytes=int(w["total_read_bytes"]), wb_total_write_bytes=int(w["total_write_bytes"]))
            row["wb_read_ok"] = dram_ok(p["dram_read_bytes"], w["total_read_bytes"], moved)
            row["wb_write_ok"] = dram_ok(p["dram_write_flushed_bytes"], w["total_write_bytes"], moved)
            row["wb_ok"] = row["wb_read_ok"] and row["wb_write_ok"]
            row["wb_write_eq_store"] = dram_ok(p["store_bytes"], w["total_write_bytes"], moved)
            if w.get("repeats"):     # the repeats' spread: the method's resolution on this launch
                ws = [r[1] for r in w["repeats"]]
                row["wb_write_spread_bytes"] = int(max(ws) - min(ws))
                row["wb_repeat_write_bytes"] = [int(x) for x in ws]
        if m is not None:
            moved = m["dram_read_bytes"] + m["dram_write_bytes"]
            row.update(meas_load_bytes=int(m["global_load_bytes"]), meas_store_bytes=int(m["global_store_bytes"]),
                       meas_l2_read_from_sm=int(m.get("l2_read_bytes_from_sm", 0)),
                       meas_l2_write_from_sm=int(m.get("l2_write_bytes_from_sm", 0)),
                       meas_dram_read_bytes=int(m["dram_read_bytes"]), meas_dram_write_bytes=int(m["dram_write_bytes"]),
                       duration_ns=m.get("duration_ns"))
            meas_req = (row["meas_load_bytes"], row["meas_store_bytes"])
            row["requested_equal"] = meas_req == (p["l1_load_bytes"], p["l1_store_bytes"])
            row["element_equal"] = meas_req == (p["load_bytes"], p["store_bytes"])
            row["dram_read_ok"] = dram_ok(p["dram_read_bytes"], m["dram_read_bytes"], moved)
            row["dram_write_ok"] = dram_ok(p["dram_write_bytes"], m["dram_write_bytes"], moved)
            row["dram_ok"] = row["dram_read_ok"] and row["dram_write_ok"]
            row["dram_total_ok"] = dram_ok(p["dram_read_bytes"] + p["dram_write_bytes"], moved, moved)
            row["alt_dram_ok"] = (dram_ok(p["alt_dram_read_bytes"], m["dram_read_bytes"], moved)
                                  and dram_ok(p["alt_dram_write_bytes"], m["dram_write_bytes"], moved))
        rows.append(row)
    return {"config": cfg, "launches": rows}


def recompare(result: dict, workers: int = 2) -> dict:
    """The measurements of ``result`` against the current kernel view and L2 model (no GPU): result["recompared"]
    = {"date_utc", "summary", "rows"} (the run's own predictions and summary stay as they were). Rows with either
    measurement (ncu's window, the write-back) are compared."""
    kept = [r for r in result["rows"] if r.get("measured") or (r.get("writeback") or {}).get("launches")]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        preds = list(pool.map(predict, [r["config"] for r in kept]))
    rows = []
    for r, p in zip(kept, preds):
        w = r.get("writeback")
        row = compare(r["config"], p, r.get("measured"), w if w and "launches" in w else None)
        rows.append(row)
    result["recompared"] = {"date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
                            "summary": summarize({"rows": rows}), "rows": rows}
    return result


def summarize(result: dict) -> dict:
    """Per kernel: configurations (not fit), launches measured; requested bytes equal to the L1 view (and to the
    element bytes); DRAM within the criterion (read, write, both; not-fit launches alone; launches of the newest
    configurations alone; read + write as one total; the previous model)."""
    out = {}
    for k in KERNELS:
        rows = [r for r in result["rows"] if r.get("config", {}).get("kernel") == k and "launches" in r]
        if not rows:
            continue
        launches = [(r["config"]["set"], L) for r in rows for L in r["launches"] if "requested_equal" in L]
        held = [L for tag, L in launches if tag != "fit"]
        newest = [L for tag, L in launches if tag == NEWEST_TAG]
        out[k] = {"configs": len(rows), "configs_not_fit": sum(r["config"]["set"] != "fit" for r in rows),
                  "launches_measured": len(launches),
                  "requested_equal": sum(L["requested_equal"] for _, L in launches),
                  "element_equal": sum(L["element_equal"] for _, L in launches),
                  "dram_read_ok": sum(L["dram_read_ok"] for _, L in launches),
                  "dram_write_ok": sum(L["dram_write_ok"] for _, L in launches),
                  "dram_ok": sum(L["dram_ok"] for _, L in launches),
                  "launches_not_fit": len(held), "dram_ok_not_fit": sum(L["dram_ok"] for L in held),
                  "launches_newest": len(newest), "dram_ok_newest": sum(L["dram_ok"] for L in newest),
                  "dram_total_ok": sum(L.get("dram_total_ok", False) for _, L in launches),
                  "alt_dram_ok": sum(L["alt_dram_ok"] for _, L in launches)}
        wb = [(tag, L) for r in rows for tag, L in [(r["config"]["set"], L) for L in r["launches"]] if "wb_ok" in L]
        out[k].update(wb_launches=len(wb), wb_read_ok=sum(L["wb_read_ok"] for _, L in wb),
                      wb_write_ok=sum(L["wb_write_ok"] for _, L in wb), wb_ok=sum(L["wb_ok"] for _, L in wb),
                      wb_launches_not_fit=sum(t != "fit" for t, _ in wb),
                      wb_ok_not_fit=sum(L["wb_ok"] for t, L in wb if t != "fit"),
                      wb_launches_newest=sum(t == NEWEST_TAG for t, _ in wb),
                      wb_ok_newest=sum(L["wb_ok"] for t, L in wb if t == NEWEST_TAG),
                      wb_write_eq_store=sum(L["wb_write_eq_store"] for _, L in wb),
                      wb_spread_max_bytes=max((L.get("wb_write_spread_bytes", 0) for _, L in wb), default=0),
                      wb_spread_median_bytes=sorted(L.get("wb_write_spread_bytes", 0) for _, L in wb)[len(wb) // 2]
                      if wb else 0)
    return out


def _config_key(cfg: dict) -> str:
    return json.dumps({k: v for k, v in cfg.items() if k != "set"}, sort_keys=True)


def merge(results: list) -> dict:
    """One sweep from several runs (each as re-compared with the current model where it was, else as judged when
    it ran): a configuration measured in a later run replaces its rows of an earlier one (keyed by everything but
    its set's name), so the summary counts each configuration once, at its newest measurement.
    Returns {"sources": [...], "rows": [...], "summary": :func:`summarize` of them, "replaced": count}."""
    rows, replaced = {}, 0
    for res in results:
        for r in (res.get("recompared") or res)["rows"]:
            if "config" not in r:
                continue
            key = _config_key(r["config"])
            replaced += key in rows
            rows[key] = r
    merged = {"rows": list(rows.values())}
    return {"rows": merged["rows"], "summary": summarize(merged), "replaced": replaced}
