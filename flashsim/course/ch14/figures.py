"""Chapter 14 figures: the recorded H200 tuning sweeps behind the Triton kernel, a picture of the Gluon kernel's
warp roles, its persistent tile order, and its measured speed against cuDNN, SDPA's FlashAttention-2 backend and
the Triton kernel, forward and backward.

Every function returns a matplotlib Figure (Agg-safe: no pyplot).
"""
from __future__ import annotations

from flashsim.course.ch14.schedule import SCHEDULES, persistent_tile_order, warp_schedule
from flashsim.course.kit.plotting import LivePlot, new_figure
from flashsim.course.kit.results import load_result

__all__ = ["plot_gluon_speed", "plot_gluon_backward", "gluon_backward_rows", "plot_warp_roles", "plot_tile_order",
           "plot_tuning_pointer_vs_tma", "plot_tuning_configs"]

_KIND_COLORS = {"load": "#9467bd", "qk": "#1f77b4", "pv": "#2ca02c", "softmax": "#ff7f0e"}
_SERIES_STYLE = {"SDPA cuDNN": ("#7f7f7f", "-", "s"), "SDPA FlashAttention-2": ("#bcbd22", "-", "v"),
                 "course Triton": ("#1f77b4", "-", "o"), "course Gluon": ("#d62728", "-", "D"),
                 "course Gluon, ping-pong off": ("#d62728", ":", "x"),
                 "course Gluon, balanced lists off": ("#d62728", "--", "+")}


def _empty(fig, text: str):
    ax = fig.add_subplot()
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=10)
    return fig


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


def plot_warp_roles(modes=SCHEDULES, kv_tiles: int = 4):
    """Chapter 14: one query tile's K/V loop as a timeline, one panel per ordering of the work
    (:func:`flashsim.course.ch14.schedule.warp_schedule`): lanes for the loads, the warps that run the softmax, and
    the tensor cores. Durations are chosen for the picture, not measured; each panel says how long the tile took
    and how busy the tensor cores were."""
    scheds = [warp_schedule(m, kv_tiles) for m in modes]
    end = max(s["end"] for s in scheds)
    fig = new_figure((10, 1.0 + 1.25 * sum(len(s["lanes"]) for s in scheds) / 2.2))
    axes = fig.subplots(len(scheds), 1, squeeze=False)[:, 0]
    titles = {"in order": "one program, in order (the Triton kernel)",
              "overlap": "two consumer warpgroups, each overlapping softmax j with its P·V of tile j − 1",
              "ping-pong": "the same, the consumers issuing in turns (ping-pong)"}
    for ax, s in zip(axes, scheds):
        lanes = list(reversed(s["lanes"]))
        for lane, start, dur, label, kind in s["bars"]:
            y = lanes.index(lane)
            ax.broken_barh([(start, dur)], (y - 0.38, 0.76), facecolors=_KIND_COLORS[kind], edgecolors="white",
                           linewidth=0.6)
            if dur >= 0.55:
                ax.text(start + dur / 2, y, label, ha="center", va="center", fontsize=6.5, color="white")
        ax.set_yticks(range(len(lanes)), lanes, fontsize=7.5)
        ax.set_xlim(0, end * 1.01)
        ax.set_ylim(-0.6, len(lanes) - 0.4)
        ax.tick_params(axis="x", labelsize=7)
        ax.set_title(f"{titles.get(s['mode'], s['mode'])}: done at {s['end']:g}, tensor cores busy "
                     f"{s['tensor_busy']:.0%}", fontsize=8.5, loc="left")
    axes[-1].set_xlabel("time (units of one 64-row matmul; durations chosen for the picture)", fontsize=8)
    from matplotlib.patches import Patch
    names = {"load": "TMA copy", "qk": "S = QKᵀ (wgmma)", "pv": "O += PV (wgmma)", "softmax": "softmax"}
    fig.legend(handles=[Patch(color=c, label=names[k]) for k, c in _KIND_COLORS.items()], loc="upper center",
               ncol=4, fontsize=7.5, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return fig


def plot_tile_order(heads: int = 8, query_blocks: int = 6, heads_per_group: int = 2, ctas: int = 12):
    """Chapter 14: which (head, query block) tiles the persistent CTAs run together, without and with L2-sized
    head groups (:func:`flashsim.course.ch14.schedule.persistent_tile_order`). Each cell is a tile, numbered by
    its place in the order; the first wave (the first `ctas` tiles, one per CTA) is red. The panel title says how
    many heads' K and V the first wave reads at once: what the L2 must hold for those reads to hit."""
    fig = new_figure((9.6, 0.9 + 0.42 * heads))
    axes = fig.subplots(1, 2)
    for ax, group, name in ((axes[0], heads, "one group: all heads"),
                            (axes[1], heads_per_group, f"groups of {heads_per_group} heads")):
        order = persistent_tile_order(heads, query_blocks, group)
        rank = {tile: t for t, tile in enumerate(order)}
        for (h, m), t in rank.items():
            wave = t // ctas
            color = "#d62728" if wave == 0 else ("#f4a582" if wave == 1 else "#e0e0e0")
            ax.add_patch(_rect(m, h, color))
            ax.text(m + 0.5, h + 0.5, str(t), ha="center", va="center", fontsize=7)
        first = {h for h, _ in order[:ctas]}
        ax.set_xlim(0, query_blocks)
        ax.set_ylim(heads, 0)
        ax.set_xticks([m + 0.5 for m in range(query_blocks)], range(query_blocks), fontsize=7)
        ax.set_yticks([h + 0.5 for h in range(heads)], range(heads), fontsize=7)
        ax.set_xlabel("query block (causal: the last is the longest)", fontsize=8)
        ax.set_ylabel("head", fontsize=8)
        ax.set_title(f"{name}: the first wave reads {len(first)} heads' K/V", fontsize=9)
        ax.set_aspect("equal")
    fig.suptitle(f"Persistent order, {ctas} CTAs (red: first wave, pink: second); longest first within a group",
                 fontsize=9)
    fig.tight_layout()
    return fig


def _rect(x, y, color):
    from matplotlib.patches import Rectangle
    return Rectangle((x, y), 1, 1, facecolor=color, edgecolor="white", linewidth=1)


_LABELS = {"fwd": "forward", "dkdv": "backward, K/V pass", "dq": "backward, dQ pass",
           "atomic": "backward, one pass (atomic dQ)"}


def plot_tuning_pointer_vs_tma(summary: list | None):
    """Chapter 14: per kernel, the best pointer-load time next to the best TMA time for each head dim and mask,
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
    fig.suptitle(f"Best configuration of each, N={first.get('n')}, fp16; label: pointer ms / TMA ms", fontsize=9)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig


def plot_tuning_configs(tuning: dict | None, causal: bool = False, kernels=("fwd", "dkdv", "dq"),
                        highlight: dict | None = None, highlight_label: str = "the package's choice (made with TMA)",
                        cap: float = 3.0):
    """Chapter 14: every timed configuration of a tuning sweep, one panel per kernel and head dim: x = block shape
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
    fig.suptitle(f"Every configuration, pointer loads, {'causal' if causal else 'non-causal'}, "
                 f"N={tuning.get('n')}, fp16; x: BLOCK_M×BLOCK_N", fontsize=9, y=0.995)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / (2.5 * len(ks) + 0.6)))
    return fig


#: the kernels of the recorded backward run, in the order drawn: (row key prefix, label)
_BWD_KERNELS = (("cudnn", "SDPA cuDNN"), ("flash", "SDPA FlashAttention-2"), ("gluon", "course Gluon"))


def gluon_backward_rows(results=None, dtype: str = "float16", mode: str = "bwd") -> list[dict]:
    """The timed rows of the recorded Gluon backward run (``gluon_backward_rows()`` reads the recorded
    ``gluon_bwd_h200``), one dtype: [{"d", "causal", "N", "SDPA cuDNN", "SDPA FlashAttention-2", "course Gluon"
    (TFLOP/s), "vs cuDNN" (Gluon's speed / cuDNN's), "correct"}, ...] sorted by (d, causal, N). ``mode="fwd"``: the
    forward of the same run (timed next to the backward on the same inputs)."""
    results = load_result("gluon_bwd_h200") if results is None else results
    suffix = "_fwd" if mode == "fwd" else ""
    out = []
    for r in results.get("rows", []):
        if r.get("dtype") != dtype or f"gluon{suffix}_tflops" not in r:
            continue
        row = {"d": r["d"], "causal": r["causal"], "N": r["N"]}
        row.update({label: r.get(f"{key}{suffix}_tflops") for key, label in _BWD_KERNELS})
        row["vs cuDNN"] = r.get(f"gluon{suffix}_vs_cudnn")
        row["correct"] = bool(r.get("fwd_correct" if suffix else "correct"))
        out.append(row)
    return sorted(out, key=lambda x: (x["d"], x["causal"], x["N"]))


def plot_gluon_backward(results=None, dtype: str = "float16"):
    """Backward TFLOP/s against N of the recorded Gluon backward, cuDNN's and SDPA's FlashAttention-2's, one panel
    per (head dim, mask): the issue's target line at 0.9x cuDNN dotted."""
    rows = gluon_backward_rows(results, dtype)
    if not rows:
        return _empty(new_figure((6.4, 2.4)), f"no recorded backward rows in {dtype}")
    panels = sorted({(r["d"], r["causal"]) for r in rows})
    fig = new_figure((3.3 * len(panels), 3.2))
    fig.subplots_adjust(left=0.06, right=0.99, bottom=0.17, top=0.74, wspace=0.25)
    for i, (d, causal) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        sel = [r for r in rows if r["d"] == d and r["causal"] == causal]
        ns = [r["N"] for r in sel]
        for _, label in _BWD_KERNELS:
            color, ls, marker = _SERIES_STYLE[label]
            ax.plot(ns, [r[label] for r in sel], ls=ls, marker=marker, ms=4, color=color, label=label)
        ax.plot(ns, [0.9 * r["SDPA cuDNN"] for r in sel], ls=":", color=_SERIES_STYLE["SDPA cuDNN"][0], lw=1,
                label="0.9 x cuDNN (the target)")
        ax.set_xscale("log", base=2)
        ax.set_xticks(ns, [f"{n:,}" for n in ns], fontsize=7)
        ax.minorticks_off()
        ax.set_ylim(0, 1.12 * max(r["SDPA cuDNN"] for r in sel))
        ax.set_title(f"d={d}{', causal' if causal else ''}", fontsize=9)
        ax.set_xlabel("N (B·N fixed)", fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        if i == 0:
            ax.set_ylabel("backward TFLOP/s", fontsize=8)
            ax.legend(fontsize=7, loc="lower left", bbox_to_anchor=(0, 1.12), ncol=4, frameon=False)
    return fig
