"""Chapter 14 figures: the warp-specialized CTA's timeline (:mod:`.ring`), a persistent grid's tile schedule
(:mod:`.schedule`), the recorded forward speeds against cuDNN (:mod:`.tables`), and the three-kernel comparison
with FlashAttention-4 (:mod:`.fa4`, re-exported).

Every function returns a matplotlib Figure (Agg-safe: no pyplot).
"""
from __future__ import annotations

from flashsim.course.ch14.fa4 import plot_fa4_comparison
from flashsim.course.ch14.ring import LANE_KINDS
from flashsim.course.ch14.tables import speed_vs_cudnn
from flashsim.course.kit.plotting import LivePlot, new_figure

__all__ = ["plot_fa4_comparison", "plot_gluon_speed", "plot_pipeline", "plot_schedule", "plot_speed_vs_cudnn"]

_KIND_COLORS = {"load": "#9467bd", "qk": "#1f77b4", "pv": "#2ca02c", "softmax": "#ff7f0e", "wait": "#d9d9d9"}
_SERIES_STYLE = {"SDPA cuDNN": ("#7f7f7f", "-", "s"), "SDPA FlashAttention-2": ("#bcbd22", "-", "v"),
                 "course Triton": ("#1f77b4", "-", "o"), "course Gluon": ("#d62728", "-", "D")}


class GluonSpeedPlot(LivePlot):
    """TFLOP/s against N, one line per kernel (chapter 14, :class:`flashsim.widgets.GluonSpeedDashboard`). New
    numbers for the same N and kernels move the lines in place; other N or kernels redraw."""

    figsize = (6.4, 3.4)
    tight = False

    def draw(self, fig, ns: list, series: dict, title: str = ""):
        fig.subplots_adjust(left=0.11, right=0.98, bottom=0.15, top=0.72)
        ax = fig.add_subplot()
        self._ax, self._ns, self._names = ax, list(ns), list(series)
        self._lines = {}
        for name, ys in series.items():
            color, ls, marker = _SERIES_STYLE.get(name, ("#555555", "-", "o"))
            xs = [n for n, y in zip(ns, ys) if y is not None]
            (self._lines[name],) = ax.plot(xs, [y for y in ys if y is not None], ls=ls, marker=marker, ms=4,
                                           color=color, label=name)
        ax.set_xscale("log", base=2)
        ax.set_xticks(ns, [f"{n:,}" for n in ns], fontsize=8)
        ax.minorticks_off()
        ax.set_xlabel("N (B·N fixed)", fontsize=8)
        ax.set_ylabel("TFLOP/s", fontsize=8)
        ax.tick_params(axis="y", labelsize=8)
        self._title = ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7, loc="lower left", bbox_to_anchor=(0, 1.1), ncol=3, frameon=False)
        self._limit(series)

    def _limit(self, series: dict) -> None:
        ys = [y for v in series.values() for y in v if y is not None] or [1.0]
        self._ax.set_ylim(0, 1.12 * max(ys))

    def refresh(self, ns, series, title=""):
        if list(ns) != self._ns or list(series) != self._names:
            return False
        for name, ys in series.items():
            if any(y is None for y in ys):
                return False
            self._lines[name].set_data(ns, ys)
        self._limit(series)
        self._title.set_text(title)
        return True


def plot_gluon_speed(ns: list, series: dict, title: str = ""):
    """TFLOP/s against N, one line per kernel: `series` {kernel label: [TFLOP/s per N, or None]} (chapter 14)."""
    return GluonSpeedPlot(ns=ns, series=series, title=title).fig


class PipelinePlot(LivePlot):
    """The timeline of :func:`flashsim.course.ch14.ring.pipeline_timeline`: one lane for the producer, one per
    consumer, one for the tensor cores (:class:`flashsim.widgets.PipelineDashboard`). Redrawn on every change: the
    lanes and bars change with the controls."""

    figsize = (9.6, 3.4)
    tight = False

    def draw(self, fig, timeline: dict, horizon: float | None = None):
        fig.subplots_adjust(left=0.1, right=0.98, bottom=0.27, top=0.9)
        ax = fig.add_subplot()
        lanes = list(reversed(timeline["lanes"]))
        for lane, start, dur, label, kind in timeline["bars"]:
            y = lanes.index(lane)
            ax.broken_barh([(start, dur)], (y - 0.38, 0.76), facecolors=_KIND_COLORS[kind], edgecolors="white",
                           linewidth=0.6)
            if kind != "wait" and dur >= 0.9:
                ax.text(start + dur / 2, y, label, ha="center", va="center", fontsize=6.5,
                        color="black" if kind == "softmax" else "white")
        ax.axvline(timeline["end"], color="black", lw=0.8, ls="--")
        ax.set_yticks(range(len(lanes)), lanes, fontsize=8)
        ax.set_xlim(0, max(horizon or 0, timeline["end"]) * 1.02)
        ax.set_ylim(-0.6, len(lanes) - 0.4)
        ax.tick_params(axis="x", labelsize=7)
        ax.set_xlabel("time (one unit: one 64-row matrix product; durations are the sliders', not measured)",
                      fontsize=8)
        p = timeline["params"]
        ax.set_title(f"{p['stages']} slots, {p['consumers']} consumer(s){', ping-pong' if p['pingpong'] else ''}: "
                     f"done at {timeline['end']:g}, tensor cores busy {timeline['tensor_busy']:.0%}",
                     fontsize=9, loc="left")
        from matplotlib.patches import Patch
        ax.legend(handles=[Patch(color=_KIND_COLORS[k], label=v) for k, v in LANE_KINDS.items()], fontsize=7,
                  ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.22), frameon=False)


def plot_pipeline(timeline: dict, horizon: float | None = None):
    """A timeline of :func:`flashsim.course.ch14.ring.pipeline_timeline` (chapter 14)."""
    return PipelinePlot(timeline=timeline, horizon=horizon).fig


class SchedulePlot(LivePlot):
    """A persistent grid's schedule (:func:`flashsim.course.ch14.schedule.deal`): one row per CTA, its tiles back
    to back, shaded by cost; the makespan and the lower bound as lines (:class:`flashsim.widgets.ScheduleDashboard`)."""

    figsize = (9.6, 3.6)
    tight = False

    def draw(self, fig, costs: list, dealt: dict, title: str = "", horizon: float | None = None):
        from matplotlib import colormaps
        fig.subplots_adjust(left=0.08, right=0.98, bottom=0.14, top=0.84)
        ax = fig.add_subplot()
        cmap, top = colormaps["viridis"], max(costs)
        for p, tiles in enumerate(dealt["tiles"]):
            t = 0.0
            for tile in tiles:
                ax.broken_barh([(t, costs[tile])], (p - 0.4, 0.8), facecolors=cmap(0.15 + 0.75 * costs[tile] / top),
                               edgecolors="white", linewidth=0.8)
                t += costs[tile]
        ax.axvline(dealt["makespan"], color="#d62728", lw=1.2, label=f"makespan {dealt['makespan']:g}")
        ax.axvline(dealt["bound"], color="black", lw=1.0, ls=":", label=f"no schedule beats {dealt['bound']:.3g}")
        ctas = len(dealt["tiles"])
        ax.set_yticks(range(ctas), [f"CTA {p}" for p in range(ctas)], fontsize=7)
        ax.set_ylim(ctas - 0.5, -0.5)
        ax.set_xlim(0, max(horizon or 0, dealt["makespan"]) * 1.03)
        ax.set_xlabel("work (K/V tiles visited, plus a tile's fixed cost); darker: a cheaper tile", fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
        ax.legend(fontsize=7, loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=2, frameon=False)
        ax.set_title(title, fontsize=9, loc="left")


def plot_schedule(costs: list, dealt: dict, title: str = "", horizon: float | None = None):
    """A persistent grid's schedule (chapter 14): `costs` per tile, `dealt` from :func:`.schedule.deal`."""
    return SchedulePlot(costs=costs, dealt=dealt, title=title, horizon=horizon).fig


_RATIO_STYLE = {"flash": ("#bcbd22", "v"), "triton": ("#1f77b4", "o"), "gluon": ("#d62728", "D")}


def plot_speed_vs_cudnn(data: dict | None = None):
    """The recorded forward run as one figure (chapter 14): per head dim and mask, each row's speed relative to
    cuDNN (the line at 1) for SDPA's FlashAttention-2 backend, the course's Triton kernel and its warp-specialized
    Gluon kernel (with the range over the timing rounds), labelled with the GPU and date the run records."""
    data = speed_vs_cudnn() if data is None else data
    fig = new_figure((10, 3.9))
    if not data:
        ax = fig.add_subplot()
        ax.axis("off")
        ax.text(0.5, 0.5, "no recorded run to show", ha="center", va="center")
        return fig
    axes = fig.subplots(1, len(data["groups"]), sharey=True, squeeze=False)[0]
    for ax, g in zip(axes, data["groups"]):
        xs = range(len(g["rows"]))
        ax.axhline(1.0, color="#7f7f7f", lw=1.2, label="SDPA cuDNN (= 1)")
        for k, label in data["kernels"].items():
            color, marker = _RATIO_STYLE.get(k, ("#555555", "o"))
            ys = [r["ratio"][k] for r in g["rows"]]
            if k == "gluon":
                lo = [y - r["range"][k][0] if k in r["range"] else 0 for y, r in zip(ys, g["rows"])]
                hi = [r["range"][k][1] - y if k in r["range"] else 0 for y, r in zip(ys, g["rows"])]
                ax.errorbar(xs, ys, yerr=[lo, hi], fmt=marker, color=color, ms=4, lw=0.8, capsize=2,
                            label=f"{label} (bar: its range over the timing rounds)")
            else:
                ax.plot(xs, ys, marker, color=color, ms=4, label=label)
        ax.set_xticks(list(xs), [f"{r['n'] // 1024}k\n{r['dtype']}" for r in g["rows"]], fontsize=6.5)
        ax.set_title(f"d = {g['d']}, {'causal' if g['causal'] else 'no mask'}", fontsize=9)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("speed / cuDNN's speed", fontsize=8)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=7.5, frameon=False)
    fig.suptitle(f"Forward attention, speed relative to cuDNN, measured on {data['label']}", fontsize=9.5,
                 x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0.07, 1, 0.95))
    return fig
