"""Figures of the benchmark result files under ``benchmarks/results/``: one function per benchmark, ``f(result, path)``.

The benchmark scripts (``benchmarks/peak_memory.py``, ``cpu_speed.py``, ``gpu_validate.py``,
``dashboard_latency.py``) write the results; the figures are drawn here, in the package, so that ``make figures``
(:mod:`flashsim.course.figures`) and each script's own ``--plot`` draw the same picture without the package importing
a script. matplotlib is imported when a figure is drawn.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from flashsim.course.kit.plotting import new_figure
from flashsim.model.hardware import KiB, MiB


#: the dashboard latency targets: a slider's median and worst key press to changed pixels (ms)
TARGET_MEDIAN_MS, TARGET_WORST_MS = 100.0, 250.0


def peak_memory(result: dict, path) -> None:
    """figures/peak_memory_cpu.png from a ``benchmarks/peak_memory.py`` result: peak memory growth of naive and
    flash attention against N on the CPU (and, where the result has one, on a GPU)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["cpu"]
    gpu = result.get("gpu")
    ns = np.array([r["N"] for r in rows], float)
    fig, axes = plt.subplots(1, 2 if gpu else 1, figsize=(13 if gpu else 7, 4.8), squeeze=False)
    ax = axes[0, 0]
    for name, style in (("naive numpy", "s--"), ("torch naive", "v--"), ("flash (numba)", "o-"),
                        ("torch SDPA", "^:")):
        pts = [(r["N"], r[name]) for r in rows if r.get(name)]
        if pts:
            x, y = zip(*pts)
            ax.plot(x, np.array(y) / MiB, style, label=name)
    ax.plot(ns, 4 * ns ** 2 / MiB, color="grey", lw=0.8, label="N x N float32 (S)")
    ax.plot(ns, 4 * ns * rows[0]["d"] / MiB, color="grey", lw=0.8, ls=":", label="N x d float32 (the output)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(f"sequence length N (d = {rows[0]['d']}, float32, one head)")
    ax.set_ylabel("peak memory growth during the call (MiB)")
    ax.set_title("CPU (this machine): naive O(N^2) vs flash O(N)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    if gpu:
        ax = axes[0, 1]
        grows = gpu["rows"]
        for name, style in (("torch naive", "v--"), ("torch SDPA (flash)", "^-")):
            pts = [(r["N"], r[name]) for r in grows if r.get(name)]
            if pts:
                x, y = zip(*pts)
                ax.plot(x, np.array(y) / MiB, style, label=name)
        gns = np.array([r["N"] for r in grows], float)
        h = grows[0]["heads"]
        ax.plot(gns, 2 * h * gns ** 2 / MiB, color="grey", lw=0.8, label="S: heads x N x N fp16")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(f"sequence length N ({h} heads, d = {grows[0]['d']}, fp16)")
        ax.set_ylabel("peak GPU memory growth (MiB)")
        ax.set_title(f"GPU ({gpu['device']}), {gpu.get('date', '')[:10]}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def cpu_speed(result: dict, path) -> None:
    """figures/cpu_speed.png from a ``benchmarks/cpu_speed.py`` result: the numba flash kernel against naive numpy
    and SDPA over N, and its block sizes against the caches."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.6))
    rows = result["speed"]
    ns = [r["N"] for r in rows]
    for name, style in (("flash (numba)", "o-"), ("naive numpy", "s--"), ("torch SDPA", "^:")):
        ax1.plot(ns, [r["median_ms"][name] for r in rows], style, label=name)
    ax1.set_xscale("log", base=2)
    ax1.set_yscale("log")
    ax1.set_xlabel("sequence length N (d = %d, float32, one head)" % rows[0]["d"])
    ax1.set_ylabel("median time (ms)")
    ax1.set_title("Attention forward on %s" % result["machine"]["cpu_short"])
    ax1.grid(True, which="both", alpha=0.3)
    ax1.legend()

    sweep = result["block_sweep"]
    for br in sorted({p["block_r"] for p in sweep["points"]}):
        pts = [p for p in sweep["points"] if p["block_r"] == br]
        ax2.plot([p["working_set_bytes"] / KiB for p in pts], [p["median_ms"] for p in pts], "o-",
                 label=f"block_r = {br}")
        for p in pts:
            ax2.annotate(str(p["block_c"]), (p["working_set_bytes"] / KiB, p["median_ms"]), fontsize=7,
                         textcoords="offset points", xytext=(2, 4))
    for label, size, color in (("L1d", sweep["l1d_bytes"], "tab:green"), ("L2 = SRAM", sweep["l2_bytes"], "tab:red")):
        if size:
            ax2.axvline(size / KiB, color=color, ls="--")
            ax2.text(size / KiB, ax2.get_ylim()[1], f" {label} {size // KiB} KiB", color=color, va="top", fontsize=8)
    ax2.set_xscale("log", base=2)
    ax2.set_xlabel("working set of one step (KiB): Q, O, K, V blocks + S tile; labels: block_c")
    ax2.set_ylabel("median time (ms)")
    ax2.set_title(f"Block size against cache size (N = {sweep['N']})")
    ax2.grid(True, which="both", alpha=0.3)
    ax2.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _pct(a, b):
    return 100.0 * (a - b) / b if b else float("nan")


def ncu_row_summary(row):
    """Ratios of one ncu row: simulated vs measured requested (L1 global) bytes, L2 bytes and DRAM bytes."""
    m, s = row["measured"], row["simulated"]
    if not m or not s or "load_bytes" not in s:
        return None
    t = m["total"]
    req_meas = t["global_load_bytes"] + t["global_store_bytes"]
    req_sim = s["load_bytes"] + s["store_bytes"]
    l2_sm = t.get("l2_read_bytes_from_sm", 0) + t.get("l2_write_bytes_from_sm", 0)
    dram_meas = t["dram_read_bytes"] + t["dram_write_bytes"]
    dram_sim = s["dram_read_bytes"] + s["dram_write_bytes"]
    if row.get("set") == "tma":                       # TMA copies bypass the L1 global counters: no "req" compare
        req_meas = float("nan")
    return {"req_meas": req_meas, "req_sim": req_sim, "req_err_pct": _pct(req_sim, req_meas),
            "l2_meas": l2_sm, "l2_err_pct": _pct(req_sim, l2_sm) if l2_sm else float("nan"),
            "l2_total": t["l2_bytes"],
            "dram_meas": dram_meas, "dram_sim": dram_sim, "dram_err_pct": _pct(dram_sim, dram_meas),
            "dram_sim_flushed": s["dram_read_bytes"] + s.get("dram_write_bytes_flushed", 0),
            "duration_us": t["duration_ns"] / 1e3}


def measured_vs_simulated(json_path, figure) -> None:
    """figures/measured_vs_simulated_h200.png from a ``benchmarks/gpu_validate.py`` result file: the kernel view's
    requested bytes and the L2 model's DRAM bytes against Nsight Compute's, one point per configuration."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with open(json_path) as f:
        result = json.load(f)
    rows = [(r, ncu_row_summary(r)) for r in result["ncu_sweep"]]
    rows = [(r, s) for r, s in rows if s]
    fig, axes = plt.subplots(1, 2, figsize=(12, 5.2))
    colors = {"flash_fwd": "tab:blue", "flash_bwd": "tab:orange", "naive": "tab:red", "tiled_matmul": "tab:green",
              "online_softmax": "tab:purple"}
    for ax, (mk, sk, title) in zip(axes, (("req_meas", "req_sim", "global-memory requests (L1 global ld+st)"),
                                          ("dram_meas", "dram_sim", "DRAM bytes (simulated with the L2 model)"))):
        seen = set()
        pts = [(r, s) for r, s in rows if s[mk] == s[mk]]            # TMA rows have no requested-byte count
        for r, s in pts:
            k = r["config"]["kernel"]
            held = r.get("set", "sweep") != "sweep"                   # held-out and TMA rows: hollow markers
            ax.scatter(s[mk], s[sk], label=None if k in seen else k, marker="s" if r["config"]["causal"] else "o",
                       s=36, facecolors="none" if held else colors[k], edgecolors=colors[k])
            seen.add(k)
        lo = min(min(s[mk], s[sk]) for _, s in pts) / 2
        hi = max(max(s[mk], s[sk]) for _, s in pts) * 2
        ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
        ax.fill_between([lo, hi], [lo * 0.9, hi * 0.9], [lo * 1.1, hi * 1.1], color="0.85", label="±10%")
        ax.set_xscale("log"); ax.set_yscale("log")
        ax.set_xlabel("measured by ncu (bytes)"); ax.set_ylabel("simulated by flashsim (bytes)")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8, loc="upper left")
    v = result["versions"]
    fig.suptitle(f"flashsim kernel view vs Nsight Compute on {v.get('gpu')} (triton {v['triton']}, "
                 f"{v['date_utc'][:10]}); squares: causal; hollow: held-out or TMA", fontsize=10)
    fig.tight_layout()
    fig.savefig(figure, dpi=130)
    plt.close(fig)


def latency_sliders(data):
    return [(r, c) for r in data["chapters"] for c in r["controls"] if c["kind"] == "slider" and c["latencies_ms"]]


def latency_plays(data):
    return [(r, c) for r in data["chapters"] for c in r["controls"] if c["kind"] == "play"]


def dashboard_latency(data, path) -> None:
    """figures/dashboard_latency.png from a result (dict or JSON path): each slider's median and worst latency
    (bars) against the targets, and each Play control's median frame gap against its interval."""
    if not isinstance(data, dict):
        data = json.loads(Path(data).read_text())
    sliders = [(f"{r['notebook'][:2]} {c['label']}", c) for r, c in latency_sliders(data)]
    plays = [(f"{r['notebook'][:2]} {c['label']}", c) for r, c in latency_plays(data)]
    fig = new_figure((9, 3.2 + 0.2 * (len(sliders) + len(plays))))
    ax = fig.add_subplot()
    ys = list(range(len(sliders)))
    ax.barh([y + 0.2 for y in ys], [c["worst_ms"] for _, c in sliders], 0.4, color="#ff9896", label="worst")
    ax.barh([y - 0.2 for y in ys], [c["median_ms"] for _, c in sliders], 0.4, color="#1f77b4", label="median")
    off = len(sliders)
    first = True
    for k, (_, c) in enumerate(plays):
        y = off + k
        gap = c["median_gap_ms"] if c["median_gap_ms"] is not None else c.get("first_frame_ms")
        if gap is not None:
            ax.barh(y - 0.2, gap, 0.4, color="#2ca02c" if c["keeps_up"] else "#d62728",
                    label="Play: median frame gap (one step: first frame)" if first else None)
        if c["interval_ms"]:
            ax.plot([c["interval_ms"]] * 2, [y - 0.45, y + 0.45], color="k", lw=2,
                    label="Play interval" if first else None)
        first = False
    ax.axvline(TARGET_MEDIAN_MS, color="#1f77b4", ls="--", lw=1, label=f"median target {TARGET_MEDIAN_MS:.0f} ms")
    ax.axvline(TARGET_WORST_MS, color="#d62728", ls="--", lw=1, label=f"worst target {TARGET_WORST_MS:.0f} ms")
    ax.set_yticks(list(range(len(sliders) + len(plays))),
                  [n for n, _ in sliders] + [f"{n} (Play)" for n, _ in plays], fontsize=7)
    ax.set_ylim(len(sliders) + len(plays) - 0.5, -0.5)
    ax.set_xscale("log")
    ax.set_xlabel("ms (key press → changed pixels; Play: time between frames)")
    load = data["machine"].get("load_average_at_start")
    ax.set_title(f"Dashboard latency in JupyterLab + Chromium, {data['size']} size, {data['date']} "
                 f"({data['machine']['cores']}-core CPU, load {load[0] if load else '?'} at the start)", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
