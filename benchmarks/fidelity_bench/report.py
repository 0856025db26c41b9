"""The markdown of benchmarks/fidelity_h200.py: the per-kernel summary tables (ncu's window, the write-back
measurement), the probe's verification, what a re-comparison changed, and the per-launch table."""
from __future__ import annotations

from flashsim.measure import criterion

from .configs import MIB, NEWEST_TAG, PREVIOUS_MODEL


def _mb(x):
    return "—" if x is None else f"{x / MIB:.2f}"


def _summary_table(summary: dict) -> list:
    lines = ["| kernel | configs (not fit) | launches | requested = L1 view | requested = element bytes | "
             f"DRAM read ok | DRAM write ok | DRAM ok | DRAM ok, not fit | DRAM ok, {NEWEST_TAG} | "
             "DRAM ok, strict 5 % | DRAM read + write ok | previous L2 model ok |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for k, s in summary.items():
        n = s["launches_measured"]
        lines.append(f"| {k} | {s['configs']} ({s['configs_not_fit']}) | {n} | {s['requested_equal']}/{n} | "
                     f"{s['element_equal']}/{n} | {s['dram_read_ok']}/{n} | {s['dram_write_ok']}/{n} | "
                     f"{s['dram_ok']}/{n} | {s['dram_ok_not_fit']}/{s['launches_not_fit']} | "
                     f"{s.get('dram_ok_newest', 0)}/{s.get('launches_newest', 0)} | "
                     f"{s.get('dram_strict_ok', '—')}/{n} | {s.get('dram_total_ok', '—')}/{n} | "
                     f"{s['alt_dram_ok']}/{n} |")
    return lines


def criterion_lines(summary: dict) -> list:
    """The write-back measurement's launches within the criterion and within the strict 5 %, all kernels."""
    n = sum(v.get("wb_launches", 0) for v in summary.values())
    ok = sum(v.get("wb_ok", 0) for v in summary.values())
    strict = sum(v.get("wb_strict_ok", 0) for v in summary.values())
    return [f"Within the criterion: **{ok}/{n}** launches ({criterion.TEXT}).",
            f"Within the strict 5 %: **{strict}/{n}** launches ({criterion.STRICT_TEXT})."]


def writeback_table(summary: dict) -> list:
    lines = ["| kernel | launches | DRAM read ok | DRAM write ok | DRAM ok | DRAM ok, not fit | "
             f"DRAM ok, {NEWEST_TAG} | strict 5 %: read / write / both | writes = stored bytes (same criterion) | "
             "repeats' write spread, median / max (MiB) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for k, s in summary.items():
        n = s.get("wb_launches", 0)
        lines.append(f"| {k} | {n} | {s.get('wb_read_ok', 0)}/{n} | {s.get('wb_write_ok', 0)}/{n} | "
                     f"{s.get('wb_ok', 0)}/{n} | {s.get('wb_ok_not_fit', 0)}/{s.get('wb_launches_not_fit', 0)} | "
                     f"{s.get('wb_ok_newest', 0)}/{s.get('wb_launches_newest', 0)} | "
                     f"{s.get('wb_strict_read_ok', 0)} / {s.get('wb_strict_write_ok', 0)} / "
                     f"{s.get('wb_strict_ok', 0)} of {n} | "
                     f"{s.get('wb_write_eq_store', 0)}/{n} | {_mb(s.get('wb_spread_median_bytes'))} / "
                     f"{_mb(s.get('wb_spread_max_bytes'))} |")
    return lines


def _probe_lines(result: dict) -> list:
    probe = result.get("writeback_probe")
    if not probe:
        return []
    m = dict({"before": 1, "after": 1, "base": 0, "repeats": 1}, **(probe.get("method") or {}))
    m.setdefault("counted", m["after"])
    lines = ["", f"Verification of the write-back measurement (`probe_writeback`; chosen flush "
             f"{result.get('writeback_flush_bytes', 0) / MIB:.0f} MiB, verified {probe.get('verified')}): a kernel "
             f"writing X MiB measured as a launch is ({m['before']} flushes before, {m['after']} after of which "
             f"{m['counted']} counted, {m['base']} after those of which {m['counted']} subtracted, {m['repeats']} "
             "repeats, the median). MiB.", "",
             "| flush | X written | window writes | after flushes' writes less own | own (base flushes) | "
             "window + residue | error | error per repeat | resolution (X < 32 MiB) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for fb, v in probe["per_flush_size"].items():
        for c in v["cases"]:
            reps = ", ".join(f"{e / MIB:+.3f}" for e in c.get("repeat_errors_bytes", []))
            lines.append(f"| {int(fb) / MIB:.0f} | {_mb(c['write_bytes'])} | {_mb(c['window_write_bytes'])} | "
                         f"{_mb(c['residue_write_bytes'])} | {_mb(c.get('own_write_bytes'))} | "
                         f"{_mb(c['total_write_bytes'])} | {c['error_bytes'] / MIB:+.3f} | {reps} | "
                         f"{_mb(v.get('resolution_bytes'))} |")
    return lines


def _hardware_lines(result: dict) -> list:
    """What the predictions were made for, and whether the run is a hold-out (another GPU than the fit's)."""
    hw = result.get("hardware")
    if not hw:
        return []
    fit = result.get("fit_gpu", "h200")
    holdout = result.get("holdout") or fit.upper() not in str(hw.get("name", "")).upper()
    what = (f"a **hold-out**: every L2-model constant as fitted on the {fit.upper()}, nothing refitted"
            if holdout else f"the GPU the L2 model's constants were fitted on ({fit.upper()})")
    return [f"- predictions for {hw['name']} ({hw['num_sms']} SMs, L2 {hw['l2_bytes']} B): {what}"]


def _launch(result: dict, cfg: dict, name: str) -> dict:
    for r in result["rows"]:
        if r.get("config") == cfg:
            return next((L for L in r.get("launches", []) if L["launch"] == name), {})
    return {}


def write_markdown(result: dict, path: str) -> None:
    info = result["info"]
    lines = [f"# Kernel view and L2 model vs Nsight Compute on {info.get('gpu') or 'no GPU (dry run)'}", "",
             f"- date (UTC): {info.get('date_utc')}; command: `{info.get('command')}`" + (" (dry run: predictions "
                                                                                         "only)" if info.get("dry_run") else ""),
             f"- python {info.get('python')}, torch {info.get('torch')}, triton {info.get('triton')}, numpy "
             f"{info.get('numpy')}; GPU {info.get('gpu')} ({info.get('sms')} SMs, L2 {info.get('l2_bytes')} B), "
             f"driver {info.get('driver')}; ncu {((info.get('ncu') or '').splitlines() or [''])[-1]}",
             f"- criteria: requested: {result['criteria']['requested']}; DRAM: {result['criteria']['dram']}",
             *_hardware_lines(result),
             f"- estimated device time {result['estimated_device_seconds']} s; wall {result.get('wall_seconds')} s",
             ""]
    m = dict({"before": 1, "after": 1, "base": 0, "repeats": 1}, **(result.get("writeback_method") or {}))
    m.setdefault("counted", m["after"])
    lines += ["## With the write-back of each launch's dirty lines (the criterion is judged on this)", "",
              f"Each launch between read-only flush kernels ({m['before']} before it, {m['after']} after it, "
              f"{m['base']} after those: the same flushes on a clean L2, adjacent in time; counted: the first "
              f"{m['counted']} after it, less the first {m['counted']} of those after them), in one ncu run with the caches left alone (`--cache-control none`, the two DRAM counters: one pass), "
              f"the measured call {m['repeats']} times, the median per launch: reads = the launch's own; writes = "
              "its own + what the flushes after it write back (less their own writes); against the L2 model with "
              "`flush_writes=True` (every dirty byte written once). `writes = stored bytes`: the same criterion "
              "against the kernel view's stored bytes (every output byte once); the spread: largest less smallest "
              "of the repeats' writes per launch.", ""]
    rec = result.get("recompared")
    if rec:                          # the headline is the current model's; the tables below keep the run's own
        lines += [f"Judged against the model as it is now (re-compared {rec['date_utc']} UTC, section at the end):"]
        lines += criterion_lines(rec["summary"]) + [""]
        lines += [f"As judged when measured, under that run's rule (DRAM: {result['criteria']['dram']}):", ""]
    else:
        lines += criterion_lines(result.get("summary", {})) + [""]
    lines += writeback_table(result.get("summary", {}))
    lines += _probe_lines(result)
    lines += ["", "## In ncu's window of each kernel alone (caches flushed before it; dirty lines left in the L2 at "
              "its end not counted)", "",
              "Against the L2 model with `flush_writes=False`.", ""]
    lines += _summary_table(result.get("summary", {}))
    if rec:
        lines += ["", f"Re-compared on {rec['date_utc']} UTC, without a GPU, against the kernel view and L2 model "
                  f"as they are now (`--recompare`): {rec.get('note', '')}", ""]
        lines += writeback_table(rec["summary"]) + [""] + _summary_table(rec["summary"]) + [""]
        for r in rec["rows"]:
            c = r["config"]
            for L in r["launches"]:
                was = _launch(result, c, L["launch"])
                for key, what, rd, wr in (("wb_ok", "write-back", "wb_total_read_bytes", "wb_total_write_bytes"),
                                          ("dram_ok", "window", "meas_dram_read_bytes", "meas_dram_write_bytes")):
                    if key not in L or L[key] == was.get(key):
                        continue
                    sim_w = "sim_dram_write_flushed_bytes" if key == "wb_ok" else "sim_dram_write_bytes"
                    lines.append(
                        f"- {what} {'now within' if L[key] else 'no longer within'} the criterion: {c['kernel']} "
                        f"{c['set']} N={c['n']} d={c['d']} {c['block_m']}x{c['block_n']}"
                        f"{' causal' if c['causal'] else ''} B×H={c['batch'] * c['heads']} {L['launch']}: read "
                        f"{_mb(was.get('sim_dram_read_bytes'))} -> {_mb(L['sim_dram_read_bytes'])} / {_mb(L.get(rd))}, "
                        f"write {_mb(was.get(sim_w))} -> {_mb(L.get(sim_w))} / {_mb(L.get(wr))} MiB (model before -> "
                        "now / measured)")
        changed = [(r["config"], L) for r in rec["rows"] for L in r["launches"]
                   if L.get("requested_equal") != _launch(result, r["config"], L["launch"]).get("requested_equal")]
        for c, L in changed:
            lines.append(f"- {c['kernel']} N={c['n']} d={c['d']} {c['block_m']}x{c['block_n']} B×H="
                         f"{c['batch'] * c['heads']} {L['launch']}: requested equal {L['requested_equal']} now "
                         f"(L1 view {_mb(L['sim_l1_load_bytes'] + L['sim_l1_store_bytes'])} MiB, ncu "
                         f"{_mb(L['meas_load_bytes'] + L['meas_store_bytes'])} MiB)")
    lines += [""] + list(result.get("notes", [])) if result.get("notes") else []
    for k, e in (result.get("errors") or {}).items():
        lines.append(f"- {k}: ncu failed: `{e.strip().splitlines()[-1]}`")
    lines += ["", "MiB. req = the kernel view's L1 bytes / ncu (load+store), elem = its element bytes; L2←SM = ncu "
              "bytes the L2 received from the SMs; DRAM r/w = L2 model / ncu; prev = the previous L2 model's settings "
              f"({', '.join(f'{k}={v}' for k, v in PREVIOUS_MODEL.items())}).", "",
              "wb = the write-back measurement: read sim / meas, write = L2 model flushed / (window + flush "
              "residue); stored = the kernel view's store bytes.", "",
              "| kernel | set | B×H | N | d | causal | blocks | launch | req L1 view / meas | elem | equal | L2←SM | "
              "DRAM read sim / meas | DRAM write sim / meas | prev read / write | ok | prev ok | "
              "wb read sim / meas | wb write sim / win + res | stored | wb ok |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        c = r.get("config", {})
        if "launches" not in r:
            lines.append(f"| {c.get('kernel')} | {c.get('set')} | | {c.get('n')} | | | | error | | | | | | | | | | "
                         "| | | |")
            continue
        for L in r["launches"]:
            meas_req = (L["meas_load_bytes"] + L["meas_store_bytes"]) if "meas_load_bytes" in L else None
            l2sm = (L["meas_l2_read_from_sm"] + L["meas_l2_write_from_sm"]) if "meas_load_bytes" in L else None
            lines.append(
                f"| {c['kernel']} | {c['set']} | {c['batch'] * c['heads']} | {c['n']} | {c['d']} | {c['causal']} | "
                f"{c['block_m']}x{c['block_n']} | {L['launch']} | "
                f"{_mb(L['sim_l1_load_bytes'] + L['sim_l1_store_bytes'])} / {_mb(meas_req)} | "
                f"{_mb(L['sim_load_bytes'] + L['sim_store_bytes'])} | {L.get('requested_equal', '—')} | "
                f"{_mb(l2sm)} | {_mb(L['sim_dram_read_bytes'])} / {_mb(L.get('meas_dram_read_bytes'))} | "
                f"{_mb(L['sim_dram_write_bytes'])} / {_mb(L.get('meas_dram_write_bytes'))} | "
                f"{_mb(L['alt_dram_read_bytes'])} / {_mb(L['alt_dram_write_bytes'])} | {L.get('dram_ok', '—')} | "
                f"{L.get('alt_dram_ok', '—')} | {_mb(L['sim_dram_read_bytes'])} / {_mb(L.get('wb_total_read_bytes'))} | "
                f"{_mb(L.get('sim_dram_write_flushed_bytes'))} / {_mb(L.get('wb_window_write_bytes'))} + "
                f"{_mb(L.get('wb_residue_write_bytes'))} | {_mb(L['sim_store_bytes'])} | {L.get('wb_ok', '—')} |")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
