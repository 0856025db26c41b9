"""Chapter 14's predicted-against-measured bytes of the Gluon kernels: each launch of the forward and the backward,
as Nsight Compute measured it and as :mod:`flashsim.measure.gluon_io` predicts it, read from the recorded run
(``gluon_io_h100``, :mod:`flashsim.course.kit.results`).

- :func:`measured_io`: one row per launch (requested L1 bytes, DRAM reads and writes, predicted and measured, and
  the verdicts of :mod:`flashsim.measure.criterion`), the counts, and the "measured on <GPU>, <date>" label from
  the run's own metadata;
- :func:`measured_io_table`: the same as a :class:`flashsim.model.table.Table` in MiB.
"""
from __future__ import annotations

from flashsim.course.kit.results import load_result, measured_on_label
from flashsim.errors import FlashsimError
from flashsim.measure import criterion
from flashsim.model.hardware import MiB
from flashsim.model.table import Table

__all__ = ["GLUON_LAUNCH_LABELS", "measured_io", "measured_io_table"]

#: the kernels' launch names (what ncu reports) as the chapter names them
GLUON_LAUNCH_LABELS = {"attn_fwd_sm90": "forward", "_gluon_bwd_prologue": "backward: prologue",
                       "attn_bwd_sm90": "backward: main", "_gluon_dq_epilogue": "backward: dQ epilogue"}


def _config_label(c: dict) -> str:
    return f"{c['dtype']} d={c['d']}{' causal' if c['causal'] else ''} N={c['N']:,} B×H={c['B']}×{c['H']}"


def _miss(pred: float, meas: float, ok: bool) -> str:
    """A direction's verdict in words: "ok", or how far the model is off, signed."""
    return "ok" if ok else f"{(pred - meas) / meas:+.0%}" if meas else "off"


def measured_io(results: dict | None = None) -> dict:
    """The recorded run (default ``gluon_io_h100``) per launch: {"label": "measured on <GPU>, <date>", "rows":
    [{"kernel", "config", "launch", "requested_pred", "requested_meas", "requested_equal", "read_pred",
    "read_meas", "write_pred", "write_meas", "read_ok", "write_ok", "dram_ok"} ...], "counts": {"fwd"/"bwd"/"all":
    {"launches", "requested_equal", "dram_ok"}}}. The DRAM verdicts are judged here, by the one criterion."""
    results = load_result("gluon_io_h100") if results is None else results
    if not isinstance(results, dict) or not results.get("rows"):
        raise FlashsimError("measured_io: not a Gluon IO comparison (no 'rows'): pass the output of "
                            "benchmarks/gluon_io/report.py, or nothing for the recorded run")
    label = measured_on_label(results)
    rows = []
    for r in results["rows"]:
        c = r["config"]
        for L in r.get("launches", []):
            if "pred" not in L:
                continue
            p = L["pred"]
            j = criterion.judge(p["dram_read_bytes"], p["dram_write_bytes"], L["meas_dram_read_bytes"],
                                L["meas_dram_write_bytes"])
            req_pred = p["lsu_load_bytes"] + p["lsu_store_bytes"]
            req_meas = L["meas_load_bytes"] + L["meas_store_bytes"]
            rows.append({"kernel": c["kernel"], "config": _config_label(c),
                         "launch": GLUON_LAUNCH_LABELS.get(L["launch"], L["launch"]),
                         "requested_pred": req_pred, "requested_meas": req_meas,
                         "requested_equal": (p["lsu_load_bytes"], p["lsu_store_bytes"]) ==
                                            (L["meas_load_bytes"], L["meas_store_bytes"]),
                         "read_pred": p["dram_read_bytes"], "read_meas": L["meas_dram_read_bytes"],
                         "write_pred": p["dram_write_bytes"], "write_meas": L["meas_dram_write_bytes"],
                         "read_ok": j["read_ok"], "write_ok": j["write_ok"], "dram_ok": j["ok"]})
    counts = {}
    for kernel in ("fwd", "bwd", "all"):
        sel = [x for x in rows if kernel in ("all", x["kernel"])]
        counts[kernel] = {"launches": len(sel), "requested_equal": sum(x["requested_equal"] for x in sel),
                          "dram_ok": sum(x["dram_ok"] for x in sel)}
    return {"label": label, "rows": rows, "counts": counts}


def measured_io_table(results: dict | None = None) -> Table:
    """:func:`measured_io` as a table of MiB, predicted / measured, with the DRAM verdict per direction."""
    io = measured_io(results)
    mib = lambda x: f"{x / MiB:.1f}"  # noqa: E731
    rows = [[x["config"], x["launch"], f"{mib(x['requested_pred'])} / {mib(x['requested_meas'])}",
             "yes" if x["requested_equal"] else "no",
             f"{mib(x['read_pred'])} / {mib(x['read_meas'])}", _miss(x["read_pred"], x["read_meas"], x["read_ok"]),
             f"{mib(x['write_pred'])} / {mib(x['write_meas'])}",
             _miss(x["write_pred"], x["write_meas"], x["write_ok"])] for x in io["rows"]]
    n = io["counts"]
    caption = (f"Gluon kernels, MiB predicted / {io['label']}: requested bytes equal in "
               f"{n['all']['requested_equal']}/{n['all']['launches']} launches, DRAM within the criterion in "
               f"{n['all']['dram_ok']}/{n['all']['launches']} (forward {n['fwd']['dram_ok']}/{n['fwd']['launches']}, "
               f"backward {n['bwd']['dram_ok']}/{n['bwd']['launches']})")
    return Table(["configuration", "launch", "requested", "equal", "DRAM read", "read", "DRAM write", "write"],
                 rows, caption)
