"""Measurements against the predictions for benchmarks/fidelity_h200.py: the DRAM criterion, one row per launch
(the kernel view's requested bytes and the L2 model's DRAM bytes against ncu's window and the write-back
measurement), a run re-compared with the current model (``--recompare``), the per-kernel summary and several runs
merged into one (``--merge``)."""
from __future__ import annotations

import json
import time
from concurrent.futures import ProcessPoolExecutor

from flashsim.measure import criterion

from .configs import KERNELS, NEWEST_TAG, hardware_of_result, predict

#: the DRAM criterion's terms (flashsim.measure.criterion: the one definition)
DRAM_REL, DRAM_LAUNCH_REL = criterion.DIRECTION_REL, criterion.LAUNCH_REL


# --- comparison ----------------------------------------------------------------------------------------------------

def dram_ok(sim: float, meas: float, moved: float, spread: float | None = None) -> bool:
    """The criterion for one launch and one direction (:func:`flashsim.measure.criterion.within`): ``moved`` is
    the launch's measured DRAM bytes, both directions; ``spread`` ncu's run-to-run spread of that direction."""
    return criterion.within(sim, meas, moved, spread)


def judge_launch(row: dict) -> dict:
    """(Re)judge one launch row from the byte counts it holds, under the criterion and the strict 5 %: the window
    flags (``dram_*``, one ncu measurement: no spread) where ncu's window was measured, the write-back flags
    (``wb_*``, the spread of its repeats) where the write-back was. Used when a row is built and when stored rows
    are counted again (:func:`merge`, ``--rejudge``), so every count follows the one definition."""
    if "meas_dram_read_bytes" in row:
        rd, wr = row["meas_dram_read_bytes"], row["meas_dram_write_bytes"]
        moved = rd + wr
        j = criterion.judge(row["sim_dram_read_bytes"], row["sim_dram_write_bytes"], rd, wr)
        row.update(dram_read_ok=j["read_ok"], dram_write_ok=j["write_ok"], dram_ok=j["ok"],
                   dram_strict_read_ok=j["strict_read_ok"], dram_strict_write_ok=j["strict_write_ok"],
                   dram_strict_ok=j["strict_ok"])
        row["dram_total_ok"] = dram_ok(row["sim_dram_read_bytes"] + row["sim_dram_write_bytes"], moved, moved)
        row["alt_dram_ok"] = criterion.judge(row["alt_dram_read_bytes"], row["alt_dram_write_bytes"], rd, wr)["ok"]
    if "wb_total_read_bytes" in row and row.get("sim_dram_write_flushed_bytes") is not None:
        rd, wr = row["wb_total_read_bytes"], row["wb_total_write_bytes"]
        reps = row.get("wb_repeat_bytes") or []
        read_spread = criterion.spread_bytes([r[0] for r in reps])
        write_spread = criterion.spread_bytes(row.get("wb_repeat_write_bytes"))
        j = criterion.judge(row["sim_dram_read_bytes"], row["sim_dram_write_flushed_bytes"], rd, wr,
                            read_spread, write_spread)
        row.update(wb_read_ok=j["read_ok"], wb_write_ok=j["write_ok"], wb_ok=j["ok"],
                   wb_strict_read_ok=j["strict_read_ok"], wb_strict_write_ok=j["strict_write_ok"],
                   wb_strict_ok=j["strict_ok"])
        row["wb_write_eq_store"] = dram_ok(row["sim_store_bytes"], wr, rd + wr, write_spread)
    return row


def compare(cfg: dict, pred: dict, measured: dict | None, writeback: dict | None = None) -> dict:
    """One row per launch: ncu's requested bytes equal to the kernel view's L1 bytes (and to its element bytes)?
    DRAM within the criterion and within the strict 5 % (:func:`judge_launch`; the L2 model, and the previous
    model), in ncu's window of the kernel alone (``measured``: the L2 model with dirty lines left in the L2 at the
    end not counted) and with the write-back of its dirty lines (``writeback``, from :func:`measure_writeback`:
    against the L2 model's ``flush_writes=True``, every dirty byte written once)?"""
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
            row.update(wb_window_read_bytes=int(w["window_read_bytes"]),
                       wb_window_write_bytes=int(w["window_write_bytes"]),
                       wb_residue_write_bytes=int(w["residue_write_bytes"]),
                       wb_residue_read_bytes=int(w["residue_read_bytes"]),
                       wb_total_read_bytes=int(w["total_read_bytes"]), wb_total_write_bytes=int(w["total_write_bytes"]))
            if w.get("repeats"):     # the repeats' spread: the method's resolution on this launch
                ws = [r[1] for r in w["repeats"]]
                row["wb_write_spread_bytes"] = int(max(ws) - min(ws))
                row["wb_repeat_write_bytes"] = [int(x) for x in ws]
                row["wb_repeat_bytes"] = [[int(r[0]), int(r[1])] for r in w["repeats"]]
        if m is not None:
            row.update(meas_load_bytes=int(m["global_load_bytes"]), meas_store_bytes=int(m["global_store_bytes"]),
                       meas_l2_read_from_sm=int(m.get("l2_read_bytes_from_sm", 0)),
                       meas_l2_write_from_sm=int(m.get("l2_write_bytes_from_sm", 0)),
                       meas_dram_read_bytes=int(m["dram_read_bytes"]), meas_dram_write_bytes=int(m["dram_write_bytes"]),
                       duration_ns=m.get("duration_ns"))
            meas_req = (row["meas_load_bytes"], row["meas_store_bytes"])
            row["requested_equal"] = meas_req == (p["l1_load_bytes"], p["l1_store_bytes"])
            row["element_equal"] = meas_req == (p["load_bytes"], p["store_bytes"])
        rows.append(judge_launch(row))
    return {"config": cfg, "launches": rows}


def rejudge(rows: list) -> list:
    """Stored result rows with every launch judged again under the criterion as it is now (no GPU, no model)."""
    for r in rows:
        for L in r.get("launches", []):
            judge_launch(L)
    return rows


def recompare(result: dict, workers: int = 2) -> dict:
    """The measurements of ``result`` against the current kernel view and L2 model (no GPU): result["recompared"]
    = {"date_utc", "summary", "rows"} (the run's own predictions and summary stay as they were). Rows with either
    measurement (ncu's window, the write-back) are compared."""
    kept = [r for r in result["rows"] if r.get("measured") or (r.get("writeback") or {}).get("launches")]
    hw = hardware_of_result(result)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        preds = list(pool.map(predict, [r["config"] for r in kept], [hw] * len(kept)))
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
                  "dram_strict_ok": sum(L.get("dram_strict_ok", False) for _, L in launches),
                  "dram_total_ok": sum(L.get("dram_total_ok", False) for _, L in launches),
                  "alt_dram_ok": sum(L["alt_dram_ok"] for _, L in launches)}
        wb = [(tag, L) for r in rows for tag, L in [(r["config"]["set"], L) for L in r["launches"]] if "wb_ok" in L]
        out[k].update(wb_launches=len(wb), wb_read_ok=sum(L["wb_read_ok"] for _, L in wb),
                      wb_write_ok=sum(L["wb_write_ok"] for _, L in wb), wb_ok=sum(L["wb_ok"] for _, L in wb),
                      wb_strict_read_ok=sum(L.get("wb_strict_read_ok", False) for _, L in wb),
                      wb_strict_write_ok=sum(L.get("wb_strict_write_ok", False) for _, L in wb),
                      wb_strict_ok=sum(L.get("wb_strict_ok", False) for _, L in wb),
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


def _repeats_by_launch(result: dict) -> dict:
    """(config key, launch) -> [[read, write], ...] of the write-back measurement's repeats stored in a run."""
    out = {}
    for r in result.get("rows", []):
        for w in ((r.get("writeback") or {}).get("launches") or []):
            if "config" in r and w.get("repeats"):
                out[_config_key(r["config"]), w["kernel"]] = [[int(x[0]), int(x[1])] for x in w["repeats"]]
    return out


def merge(results: list) -> dict:
    """One sweep from several runs (each as re-compared with the current model where it was, else with the
    predictions of its run; every launch judged again under the criterion as it is now, :func:`judge_launch`): a
    configuration measured in a later run replaces its rows of an earlier one (keyed by everything but its set's
    name), so the summary counts each configuration once, at its newest measurement.
    Returns {"sources": [...], "rows": [...], "summary": :func:`summarize` of them, "replaced": count}."""
    rows, replaced = {}, 0
    for res in results:
        repeats = _repeats_by_launch(res)
        for r in (res.get("recompared") or res)["rows"]:
            if "config" not in r:
                continue
            key = _config_key(r["config"])
            for L in r.get("launches", []):      # a re-compared row keeps no raw repeats: take its run's
                if "wb_repeat_bytes" not in L and (key, L["launch"]) in repeats:
                    L["wb_repeat_bytes"] = repeats[key, L["launch"]]
            replaced += key in rows
            rows[key] = r
    merged = {"rows": rejudge(list(rows.values()))}
    return {"rows": merged["rows"], "summary": summarize(merged), "replaced": replaced}
