"""Chapter 05 figures: the FlashAttention forward loop stepped, traffic vs block size (FA1 Fig. 2 middle), FA1 vs
FA2 loop order, and flash vs naive error. Every function returns a matplotlib Figure (Agg-safe: no pyplot).

:class:`TileStatePlot` is introduced here and reused by chapter 07's backward stepper.
"""
from __future__ import annotations

import numpy as np

from flashsim.course.ch05.traffic import BlockSweep
from flashsim.course.kit.plotting import LivePlot, figure_to_png, new_figure

__all__ = ["TileStatePlot", "TrafficVsBlockPlot", "plot_tile_state", "plot_traffic_vs_block", "plot_loop_order",
           "plot_flash_vs_naive_error", "figure_to_png", "figure_fa1_fig2_middle"]

_IN_SRAM = "#2ca02c"
_IN_HBM = "#d9d9d9"
_CURRENT = "#d62728"
_ROW = "#1f77b4"
#: tensors blocked by rows of K/V (Tc blocks); the others by rows of Q (Tr blocks)
FLASH_COL_TENSORS = ("K", "V", "dK", "dV")
_UNKNOWN = "#eeeeee"
#: the caption's fixed part (its changing part is the state's "caption")
_TILE_LEGEND = "Tiles: green = in SRAM, grey = in HBM only, red edge = this step."


class TileStatePlot(LivePlot):
    """One step of a tiled loop: which tiles of each tensor are in SRAM, and the per-row state.

    ``state`` (built by :class:`flashsim.widgets.FlashStepper`): ``blocks`` {tensor: number of blocks},
    ``in_sram`` set of (tensor, block index), ``current`` set of (tensor, block index) this step touches,
    ``title``, ``rows`` {label: array over the N rows (NaN = not yet known)}, ``caption``. A new step of the same
    loop recolours the tiles and resizes the bars in place.

    Introduced in chapter 05.
    """

    figsize = (11, 2.6 + 1.25 * 4)
    tight = False       # fixed margins (inches): tight_layout gave up on four row plots with a warning

    def __init__(self, state: dict):
        self.figsize = (11, 2.6 + 1.25 * len(state.get("rows", {})))
        super().__init__(state=state)

    def draw(self, fig, state):
        from matplotlib.collections import PolyCollection
        rows = state.get("rows", {})
        height = fig.get_figheight()
        # above: the title and the top axis' block indices (0.8 in); below: the x label and the caption (0.8 in)
        gs = fig.add_gridspec(1 + len(rows), 1, height_ratios=[2.2] + [1] * len(rows), left=0.075, right=0.99,
                              top=1 - 0.8 / height, bottom=0.8 / height, hspace=0.38)
        ax = fig.add_subplot(gs[0])
        tensors = list(state["blocks"])
        width = max(state["blocks"].values())
        # every tile is one polygon of one collection: recolouring 50 tiles is one artist to draw, not 50
        self._keys, verts = [], []
        for y, name in enumerate(tensors):
            nb = state["blocks"][name]
            for b in range(nb):
                x0, x1 = b * width / nb, (b + 1) * width / nb
                verts.append([(x0, -y - 0.4), (x1, -y - 0.4), (x1, -y + 0.4), (x0, -y + 0.4)])
                self._keys.append((name, b))
        self._tiles = ax.add_collection(PolyCollection(verts, facecolors=_IN_HBM, edgecolors="white",
                                                       linewidths=1))
        ax.set_xlim(0, width)
        ax.set_ylim(-len(tensors) + 0.4, 0.6)
        ax.set_yticks([-y for y in range(len(tensors))], tensors)
        # block indices on the top axis, not in every tile (texts are what a frame costs most to draw)
        ax.set_xticks([])
        top = ax.secondary_xaxis("top")
        top.set_xticks([b + 0.5 for b in range(width)], [str(b) for b in range(width)], fontsize=7)
        top.set_xlabel("block index (i for blocks of Q's rows, j for blocks of K/V's rows)", fontsize=8, labelpad=2)
        ax.tick_params(length=0)
        # the title above the top axis' labels (an axes text: Axes.title would be placed under them)
        from matplotlib.transforms import offset_copy
        self._title = ax.text(0.5, 1.0, "", transform=offset_copy(ax.transAxes, fig=fig, y=27, units="points"),
                              ha="center", va="bottom", fontsize=10)
        self.animate(self._tiles, self._title)
        self._bars, self._span = {}, {}
        first = None
        for k, (label, values) in enumerate(rows.items()):
            a = fig.add_subplot(gs[k + 1], sharex=first if first is not None else None)
            first = first or a
            n = np.asarray(values).size
            bars = a.add_collection(PolyCollection([_bar(i, 0.0) for i in range(n)], facecolors=_UNKNOWN,
                                                   edgecolors="none"))
            a.set_xlim(-0.6, n - 0.4)
            self._bars[label] = (a, bars)
            a.set_ylabel(label, fontsize=8)
            a.tick_params(labelsize=7)
            lo, hi = state.get("rows_lim", {}).get(label, (None, None))
            if lo is None:
                lo, hi = 0.0, 1.0
            pad = 0.05 * (hi - lo) if hi > lo else 1.0      # the whole run's range: no rescaling while stepping
            a.set_ylim(lo - (pad if lo < 0 else 0), hi + pad)
            self._span[label] = a.get_ylim()                # a row not computed yet fills it in light grey
            self.animate(bars)
        if first is not None:
            fig.axes[-1].set_xlabel("row of Q (query index)")
            # in the background, once: a per-plot "not computed yet" text was a third of every frame's cost
            first.text(1.0, 1.04, "row plots: light grey = not computed yet", transform=first.transAxes,
                       ha="right", va="bottom", fontsize=7, color="#666666")
        # axes' texts in figure coordinates (animated figure-level artists would be left out of saved figures): the
        # caption's changing part is animated, its legend part stays in the background (glyphs are what a frame
        # costs most to draw)
        self._caption = self.animate(ax.text(0.01, 0.005, "", fontsize=8, va="bottom", transform=fig.transFigure))
        ax.text(0.99, 0.005, _TILE_LEGEND, fontsize=8, va="bottom", ha="right", transform=fig.transFigure)
        self._show(state)

    def _show(self, state) -> None:
        current = state.get("current") or ()
        self._tiles.set_facecolor([_IN_SRAM if key in state["in_sram"] else _IN_HBM for key in self._keys])
        self._tiles.set_edgecolor([_CURRENT if key in current else "white" for key in self._keys])
        self._tiles.set_linewidth([2.5 if key in current else 1 for key in self._keys])
        self._title.set_text(state.get("title", ""))
        self._caption.set_text(state.get("caption", ""))
        for label, values in state.get("rows", {}).items():
            a, bars = self._bars[label]
            values = np.asarray(values, float)
            known = np.isfinite(values)
            lo, hi = self._span[label]
            bars.set_verts([_bar(i, v) if ok else _bar(i, hi, bottom=lo)
                            for i, (v, ok) in enumerate(zip(values, known))])
            bars.set_facecolor([_ROW if ok else _UNKNOWN for ok in known])

    def refresh(self, state) -> bool:
        old = self.args["state"]
        if old["blocks"] != state["blocks"] or list(old.get("rows", {})) != list(state.get("rows", {})):
            return False
        self._show(state)
        return True


def plot_tile_state(state: dict):
    """One step of a tiled loop as a Figure (:class:`TileStatePlot`). Introduced in chapter 05."""
    return TileStatePlot(state).fig


def _bar(i: int, height: float, width: float = 0.9, bottom: float = 0.0) -> list:
    """The corners of bar i (centred on i, from `bottom` to `height`) of a bar chart drawn as one PolyCollection."""
    return [(i - width / 2, bottom), (i + width / 2, bottom), (i + width / 2, height), (i - width / 2, height)]


class TrafficVsBlockPlot(LivePlot):
    """Bars of simulated HBM traffic per block size, the paper's numbers beside them, the current block marked
    (``block_cs``, ``simulated_gb`` with NaN where the tiles do not fit, ``current``, ``paper`` {Bc: GB} or
    None, ``title``). Moving the block or the device changes the bars in place.

    Introduced in chapter 05.
    """

    figsize = (6.4, 3.6)

    def draw(self, fig, block_cs, simulated_gb, current=None, paper=None, title="", ylabel="HBM traffic (GB)"):
        ax = self._ax = fig.add_subplot()
        x = np.arange(len(block_cs))
        w = 0.4 if paper else 0.7
        self._bars = ax.bar(x - (w / 2 if paper else 0), np.zeros(len(block_cs)), w, color="#1f77b4",
                            label="flashsim (simulated)")
        self._labels = [ax.text(r.get_x() + r.get_width() / 2, 0, "", ha="center", va="bottom", fontsize=7)
                        for r in self._bars]
        self._top = 0.0
        if paper:
            vals = [paper.get(b, np.nan) for b in block_cs]
            pb = ax.bar(x + w / 2, vals, w, color="#ff7f0e", alpha=0.8, label="FA1 paper, Fig. 2 middle")
            for rect, v in zip(pb, vals):
                if np.isfinite(v):
                    ax.text(rect.get_x() + rect.get_width() / 2, v, f"{v:.2f}", ha="center", va="bottom",
                            fontsize=7)
            self._top = float(np.nanmax(vals)) if np.isfinite(vals).any() else 0.0
        ax.set_xticks(x, [str(b) for b in block_cs])
        ax.set_xlabel("block size Bc (columns of K/V per block)")
        ax.set_ylabel(ylabel)
        self._title = ax.set_title("", fontsize=9)
        ax.legend(fontsize=8)
        self.animate(*self._bars, *self._labels, self._title)
        self._show(block_cs, simulated_gb, current, title)

    def _show(self, block_cs, simulated_gb, current, title):
        for rect, label, b, v in zip(self._bars, self._labels, block_cs, simulated_gb):
            ok = np.isfinite(v)
            rect.set_height(v if ok else 0.0)
            rect.set_facecolor(_CURRENT if b == current else "#1f77b4")
            label.set_position((rect.get_x() + rect.get_width() / 2, v if ok else 0.0))
            label.set_text(f"{v:.2f}" if ok else "does not\nfit")
            label.set_color("black" if ok else _CURRENT)
        top = max([self._top] + [float(v) for v in simulated_gb if np.isfinite(v)])
        self._ax.set_ylim(0, top * 1.12 if top > 0 else 1.0)
        self._title.set_text(title)

    def refresh(self, block_cs, simulated_gb, current=None, paper=None, title="", ylabel="HBM traffic (GB)"):
        if (list(block_cs), paper, ylabel) != (list(self.args["block_cs"]), self.args.get("paper"),
                                               self.args.get("ylabel", "HBM traffic (GB)")):
            return False
        self._show(block_cs, simulated_gb, current, title)
        return True


def plot_traffic_vs_block(block_cs, simulated_gb, *, current=None, paper: dict | None = None, title: str = "",
                          ylabel: str = "HBM traffic (GB)"):
    """:class:`TrafficVsBlockPlot` as a Figure. Introduced in chapter 05."""
    return TrafficVsBlockPlot(block_cs=list(block_cs), simulated_gb=list(simulated_gb), current=current,
                              paper=paper, title=title, ylabel=ylabel).fig


def plot_loop_order(tr: int, tc: int, bytes_by_tensor: dict | None = None):
    """Left: the order FA1 (outer loop over K/V blocks j) and FA2 (outer loop over Q blocks i) visit the S tiles.
    Right (when given): HBM bytes by tensor, {algo: {tensor: bytes}}.

    Introduced in chapter 05.
    """
    ncols = 3 if bytes_by_tensor else 2
    fig = new_figure((4 * ncols, 3.6))
    for k, (algo, outer) in enumerate((("FA1: outer loop over K/V blocks j", "j"),
                                       ("FA2: outer loop over Q blocks i", "i"))):
        ax = fig.add_subplot(1, ncols, k + 1)
        order = np.zeros((tr, tc), int)
        step = 0
        if outer == "j":
            for j in range(tc):
                for i in range(tr):
                    order[i, j] = step
                    step += 1
        else:
            for i in range(tr):
                for j in range(tc):
                    order[i, j] = step
                    step += 1
        ax.imshow(order, cmap="viridis", aspect="auto")
        for i in range(tr):
            for j in range(tc):
                late = order[i, j] > 0.6 * (tr * tc - 1)   # viridis turns light green/yellow: dark text there
                ax.text(j, i, str(order[i, j]), ha="center", va="center", fontsize=8,
                        color="black" if late else "white")
        ax.set_xticks(range(tc))
        ax.set_yticks(range(tr))
        ax.set_xlabel("K/V block j")
        ax.set_ylabel("Q block i")
        ax.set_title(algo + "\n(number = visit order)", fontsize=9)
    if bytes_by_tensor:
        ax = fig.add_subplot(1, ncols, 3)
        algos = list(bytes_by_tensor)
        names = sorted({t for d in bytes_by_tensor.values() for t in d})
        w = 0.8 / len(algos)
        for a, algo in enumerate(algos):
            vals = [bytes_by_tensor[algo].get(t, 0) / 1e6 for t in names]
            ax.bar(np.arange(len(names)) + a * w - 0.4 + w / 2, vals, w, label=algo)
        ax.set_xticks(np.arange(len(names)), names)
        ax.set_ylabel("HBM MB (reads + writes)")
        ax.set_title("bytes by tensor", fontsize=9)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_flash_vs_naive_error(errors: dict, title: str = ""):
    """Histograms of |difference| per output element, {label: array of differences} (log x axis).

    Introduced in chapter 05.
    """
    fig = new_figure((6.4, 3.4))
    ax = fig.add_subplot()
    finite = [np.abs(np.asarray(v, float)).ravel() for v in errors.values()]
    lo = max(min((v[v > 0].min() for v in finite if (v > 0).any()), default=1e-12), 1e-12)
    hi = max((v.max() for v in finite), default=1.0)
    bins = np.logspace(np.log10(lo), np.log10(max(hi, lo * 10)), 40)
    for (label, _), v in zip(errors.items(), finite):
        zeros = int((v == 0).sum())
        # elements that agree exactly have no place on a log axis: they are counted in the legend, not drawn
        ax.hist(v[v > 0], bins=bins, histtype="step", linewidth=1.6,
                label=f"{label} (max {v.max():.1e}; {zeros} of {v.size} exactly 0, not drawn)")
    ax.set_xscale("log")
    ax.set_xlabel("|difference| per output element (nonzero ones)")
    ax.set_ylabel("elements")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def figure_fa1_fig2_middle():
    """figures/fa1_fig2_middle.png

    FA1 Fig. 2 middle reproduced: Algorithm 1's forward HBM traffic at N=1024, d=64, 16 heads × batch 64, fp16
    (statistics in fp16 too), A100, for Bc = 64…512, simulated (count mode) next to the paper's bars.

    Introduced in chapter 05.
    """
    return TrafficVsBlockPlot(**BlockSweep(block_cs=(64, 128, 256, 512)).plot_args("a100", current=64)).fig
