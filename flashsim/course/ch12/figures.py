"""Chapter 12 figures: the learner's kernel, its measured IO against the simulator's, its speed against SDPA, and
the H200 tuning sweeps behind the course's fast kernel (read by :mod:`flashsim.course.ch12.dashboards`).

Every function returns a matplotlib Figure (Agg-safe: no pyplot).
"""
from __future__ import annotations

from pathlib import Path

from flashsim.course.kit.plotting import LivePlot, new_figure

__all__ = ["plot_kernel_io_by_tensor", "plot_speed_vs_sdpa", "plot_tuning_pointer_vs_tma", "plot_tuning_configs"]


class KernelIOPlot(LivePlot):
    """Bars per tensor (Q, K, V loaded; O, LSE stored): simulated KiB, and measured KiB where given (chapter 12).
    New byte counts change the bar heights in place; another set of tensors redraws."""

    figsize = (6.4, 3.2)
    tight = False               # fixed margins: the legend above the axes, the title under it

    def draw(self, fig, simulated: dict, measured: dict | None = None, title: str = ""):
        fig.subplots_adjust(left=0.1, right=0.98, bottom=0.17, top=0.8)
        ax = fig.add_subplot()
        self._names = [("load", t) for t in sorted(simulated["loads"])] + [("store", t)
                                                                          for t in sorted(simulated["stores"])]
        xs = list(range(len(self._names)))
        w = 0.38 if measured else 0.6
        self._sim = ax.bar([x - (w / 2 if measured else 0) for x in xs], self._kib(simulated), w,
                           label="simulated (kernel_io)", color="#1f77b4")
        self._meas = (ax.bar([x + w / 2 for x in xs], self._kib(measured), w, label="measured (count_io)",
                             color="#d62728") if measured else None)
        ax.set_xticks(xs, [f"{t}\n{k}" for k, t in self._names])
        ax.set_ylabel("KiB")
        self._title = ax.set_title(title, fontsize=9)
        ax.legend(fontsize=8, loc="lower left", bbox_to_anchor=(0, 1.08), ncol=2, frameon=False)
        self._ax = ax
        self._limit(simulated, measured)

    def _kib(self, io: dict) -> list:
        return [io["loads" if k == "load" else "stores"].get(t, 0) / 1024 for k, t in self._names]

    def _limit(self, simulated, measured) -> None:
        self._ax.set_ylim(0, 1.1 * max(self._kib(simulated) + (self._kib(measured) if measured else []) + [1e-3]))

    def refresh(self, simulated, measured=None, title=""):
        names = [("load", t) for t in sorted(simulated["loads"])] + [("store", t) for t in sorted(simulated["stores"])]
        if names != self._names or (measured is None) != (self._meas is None):
            return False
        for bars, io in ((self._sim, simulated), (self._meas, measured)):
            if bars is not None:
                for bar, h in zip(bars, self._kib(io)):
                    bar.set_height(h)
        self._limit(simulated, measured)
        self._title.set_text(title)
        return True


def plot_kernel_io_by_tensor(simulated: dict, measured: dict | None = None, title: str = ""):
    """Bars per tensor (Q, K, V loaded; O, LSE stored): simulated bytes, and measured bytes where given.

    simulated / measured: {"loads": {tensor: bytes}, "stores": {tensor: bytes}} (one launch).
    """
    return KernelIOPlot(simulated=simulated, measured=measured, title=title).fig


def plot_speed_vs_sdpa(speed: dict | None):
    """Median ms and TFLOP/s of the learner's kernel, flashsim.kernels.flash_forward and torch SDPA (its fastest
    backend, named), from a GPU run of :func:`flashsim.exercises.sdpa_speed`; without the learner's kernel
    (``learner_ms`` None: it has not passed yet) the course's kernel and SDPA only; without a GPU (speed None) a
    panel that says so."""
    fig = new_figure((6.4, 3.0))
    if not speed:
        ax = fig.add_subplot()
        ax.axis("off")
        ax.text(0.5, 0.5, "no CUDA GPU: speed against SDPA is measured on a GPU only\n"
                "(the interpreter's wall time says nothing about a GPU)", ha="center", va="center", fontsize=10)
        return fig
    backend = str(speed.get("sdpa_backend") or "").split(" (")[0]
    bars = [("yours", "learner_ms", "learner", "#d62728"),                 # (label, ms key, TFLOP/s key, colour)
            ("flashsim\nflash_forward", "flashsim_ms", "flashsim", "#1f77b4"),
            ("torch SDPA" + (f"\n{backend}" if backend else ""), "sdpa_ms", "sdpa", "#7f7f7f")]
    bars = [b for b in bars if speed.get(b[1]) is not None]
    labels, colors = [b[0] for b in bars], [b[3] for b in bars]
    ax1, ax2 = fig.subplots(1, 2)
    ax1.bar(labels, [speed[b[1]] for b in bars], color=colors)
    ax1.set_ylabel("median ms (do_bench)")
    ax2.bar(labels, [speed["tflops"][b[2]] for b in bars], color=colors)
    ax2.set_ylabel("TFLOP/s (4·B·H·N²·d / t)")
    s = speed["size"]
    fig.suptitle(f"{speed.get('device', 'GPU')}: B={s['batch']}, H={s['heads']}, N={s['n']}, d={s['d']}, "
                 f"{s['dtype']}{', causal' if s['causal'] else ''}"
                 + ("" if speed.get("learner_ms") is not None else " (your kernel has not passed yet)"), fontsize=9)
    for ax in (ax1, ax2):
        ax.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    return fig


def _empty(fig, text: str):
    ax = fig.add_subplot()
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=10)
    return fig


_LABELS = {"fwd": "forward", "dkdv": "backward, K/V pass", "dq": "backward, dQ pass",
           "atomic": "backward, one pass (atomic dQ)"}


def plot_tuning_pointer_vs_tma(summary: list | None):
    """Chapter 12: per kernel, the best pointer-load time next to the best TMA time for each head dim and mask,
    labelled with the speedup (pointer ms / TMA ms). `summary`: :func:`flashsim.widgets.tuning_summary`'s rows."""
    rows = [r for r in (summary or []) if r.get("pointer_ms") is not None or r.get("tma_ms") is not None]
    if not rows:
        return _empty(new_figure((6.4, 2.4)), "no tuning sweep with pointer and TMA rows\n"
                                              "(a tuning sweep of benchmarks/tune_attention.py, written on a GPU)")
    kernels = list(dict.fromkeys(r["kernel"] for r in rows))
    fig = new_figure((3.6 * len(kernels), 3.4))
    axes = fig.subplots(1, len(kernels), squeeze=False)[0]
    w = 0.38
    for ax, kernel in zip(axes, kernels):
        mine = [r for r in rows if r["kernel"] == kernel]
        xs = list(range(len(mine)))
        ptr = [r["pointer_ms"] or 0 for r in mine]
        tma = [r["tma_ms"] or 0 for r in mine]
        ax.bar([x - w / 2 for x in xs], ptr, w, color="#7f7f7f", label="pointer loads (tl.load)")
        ax.bar([x + w / 2 for x in xs], tma, w, color="#1f77b4", label="TMA (tensor descriptors)")
        for x, r in zip(xs, mine):
            if r.get("speedup"):
                top = max(r["pointer_ms"], r["tma_ms"])
                ax.text(x, top * 1.02, f"×{r['speedup']:.2f}", ha="center", va="bottom", fontsize=8,
                        color="#1f77b4" if r["speedup"] >= 1 else "#d62728")
        ax.set_xticks(xs, [f"d={r['d']}\n{'causal' if r['causal'] else 'full'}" for r in mine], fontsize=8)
        ax.set_ylim(0, max(ptr + tma) * 1.18)
        ax.set_title(_LABELS.get(kernel, kernel), fontsize=9)
    axes[0].set_ylabel("best median ms (do_bench)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=8, frameon=False)
    first = rows[0]
    fig.suptitle(f"Best configuration of each, N={first.get('n')}, fp16; label: pointer ms / TMA ms "
                 f"({Path(first.get('source', '')).name})", fontsize=9)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig


def plot_tuning_configs(tuning: dict | None, causal: bool = False, kernels=("fwd", "dkdv", "dq"),
                        highlight: dict | None = None, highlight_label: str = "TUNED_H200 (chosen with TMA)",
                        cap: float = 3.0):
    """Chapter 12: every timed configuration of a tuning sweep, one panel per kernel and head dim: x = block shape
    BLOCK_M×BLOCK_N, y = time relative to the panel's fastest, colour = pipeline stages, marker = warps.

    `tuning`: :func:`flashsim.widgets.load_tuning` (e.g. ``wide=True``); pointer loads without warp specialization
    only. `highlight`: {(kernel, d, causal): (BLOCK_M, BLOCK_N, warps, stages)} to ring, e.g.
    :func:`flashsim.widgets.tuned_configs` (the package's choices). Points slower than `cap` × the fastest are drawn
    at the cap."""
    rows = [r for r in ((tuning or {}).get("rows") or []) if not r["tma"] and not r["ws"] and r["causal"] == causal
            and r["kernel"] in kernels]
    if not rows:
        return _empty(new_figure((6.4, 2.4)), "no tuning sweep with pointer-load rows to draw\n"
                                              "(a wide sweep of benchmarks/tune_attention.py, written on a GPU)")
    ks = [k for k in kernels if any(r["kernel"] == k for r in rows)]
    ds = sorted({r["d"] for r in rows})
    fig = new_figure((4.3 * len(ds), 2.5 * len(ks) + 0.6))
    axes = fig.subplots(len(ks), len(ds), squeeze=False)
    stage_colors = {2: "#1f77b4", 3: "#ff7f0e", 4: "#2ca02c"}
    warp_markers = {4: "o", 8: "^"}
    stages = sorted({r["s"] for r in rows})
    warps = sorted({r["w"] for r in rows})
    for i, kernel in enumerate(ks):
        for j, d in enumerate(ds):
            ax = axes[i][j]
            mine = [r for r in rows if r["kernel"] == kernel and r["d"] == d]
            if not mine:
                ax.axis("off")
                continue
            best = min(r["ms"] for r in mine)
            shapes = sorted({(r["bm"], r["bn"]) for r in mine})
            where = {sh: k for k, sh in enumerate(shapes)}
            for r in mine:
                dx = (stages.index(r["s"]) - (len(stages) - 1) / 2) * 0.14
                dx += (warps.index(r["w"]) - (len(warps) - 1) / 2) * 0.05
                ax.scatter(where[(r["bm"], r["bn"])] + dx, min(r["ms"] / best, cap), s=22,
                           color=stage_colors.get(r["s"], "#7f7f7f"), marker=warp_markers.get(r["w"], "s"),
                           alpha=0.85, linewidths=0)
            pick = (highlight or {}).get((kernel, d, causal))
            if pick and (pick[0], pick[1]) in where:
                hit = [r for r in mine if (r["bm"], r["bn"], r["w"], r["s"]) == tuple(pick)]
                if hit:
                    ax.scatter(where[(pick[0], pick[1])], min(hit[0]["ms"] / best, cap), s=110, facecolors="none",
                               edgecolors="#d62728", linewidths=1.4)
            ax.axhline(1.0, color="#999999", lw=0.8, ls=":")
            ax.set_xticks(range(len(shapes)), [f"{bm}×{bn}" for bm, bn in shapes], fontsize=7, rotation=45)
            ax.set_ylim(0.95, min(cap, max(r["ms"] / best for r in mine)) * 1.05)
            ax.set_title(f"{_LABELS.get(kernel, kernel)}, d={d}: best {best:.3f} ms", fontsize=8)
            if j == 0:
                ax.set_ylabel(f"time / fastest (≤ {cap:g})", fontsize=8)
            ax.tick_params(axis="y", labelsize=7)
    from matplotlib.lines import Line2D
    handles = ([Line2D([], [], ls="", marker="o", color=stage_colors.get(s, "#7f7f7f"), label=f"{s} stages")
                for s in stages]
               + [Line2D([], [], ls="", marker=warp_markers.get(w, "s"), color="#555555", label=f"{w} warps")
                  for w in warps])
    if highlight:
        handles.append(Line2D([], [], ls="", marker="o", markerfacecolor="none", markeredgecolor="#d62728",
                              markersize=9, label=highlight_label))
    fig.legend(handles=handles, loc="upper center", ncol=len(handles), fontsize=7, frameon=False,
               bbox_to_anchor=(0.5, 0.975))
    src = Path(tuning.get("source", "")).name
    fig.suptitle(f"Every configuration, pointer loads, {'causal' if causal else 'non-causal'}, "
                 f"N={tuning.get('n')}, fp16 ({src}); x: BLOCK_M×BLOCK_N", fontsize=9, y=0.995)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / (2.5 * len(ks) + 0.6)))
    return fig
