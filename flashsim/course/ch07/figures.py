"""Chapter 07 figures: bytes and FLOPs of storing P vs recomputing it, and the gradient check.
Every function returns a matplotlib Figure (Agg-safe: no pyplot); :class:`BackwardCostsPlot` is the dashboard's
figure, changed in place (:class:`flashsim.course.kit.plotting.LivePlot`)."""
from __future__ import annotations

import numpy as np

from flashsim.course.kit.plotting import LivePlot
from flashsim.model.simulator import traffic

__all__ = ["plot_backward_costs", "plot_gradient_check", "figure_backward_recompute"]


def backward_cost_rows(n: int, d: int, dtype: str = "fp16", device: str = "h200") -> dict:
    """{"standard: store P": Traffic, "flash2: recompute P": Traffic}: forward + backward in count mode (chapter 07)."""
    kw = dict(dtype=dtype, device=device, backward=True)
    return {"standard: store P": traffic("naive", n, d, **kw), "flash2: recompute P": traffic("flash2", n, d, **kw)}


class BackwardCostsPlot(LivePlot):
    """Two panels, HBM bytes and FLOPs, forward and backward stacked, one bar per algorithm (chapter 07). A new N
    or d changes the bars, their value labels, the y axes (animated: their ticks are drawn with every frame) and
    the title in place, so a slider move is blitted."""

    figsize = (9, 3.6)
    PANELS = (("hbm_bytes", "HBM bytes (MB)", 1e6), ("flops", "FLOPs (GFLOP)", 1e9))

    def draw(self, fig, rows: dict, title: str = ""):
        from matplotlib.ticker import MaxNLocator
        labels = list(rows)
        self._panels = []
        for k, (key, unit, scale) in enumerate(self.PANELS):
            ax = fig.add_subplot(1, 2, k + 1)
            x = np.arange(len(labels))
            zeros = np.zeros(len(labels))
            fwd = ax.bar(x, zeros, 0.6, label="forward", color="#1f77b4")
            bwd = ax.bar(x, zeros, 0.6, bottom=zeros, label="backward", color="#ff7f0e")
            texts = [ax.text(xi, 0, "", ha="center", va="bottom", fontsize=8) for xi in x]
            ax.set_xticks(x, labels, fontsize=8)
            # the y axis moves with N and d, so it is animated (drawn with every frame): few ticks, and its label
            # a text of its own in the background (glyphs are what a frame costs most to draw)
            ax.yaxis.set_major_locator(MaxNLocator(nbins=4))
            ax.text(-0.16, 0.5, unit, rotation=90, transform=ax.transAxes, ha="center", va="center")
            ax.legend(fontsize=8, loc="upper center", ncol=2)
            self.animate(*fwd, *bwd, *texts, ax.yaxis)
            self._panels.append((ax, key, scale, list(fwd), list(bwd), texts))
        # an axes' text in figure coordinates: animated figure-level artists would be left out of saved figures
        self._title = self.animate(fig.axes[0].text(0.5, 0.98, "", transform=fig.transFigure, ha="center",
                                                    va="top", fontsize=9))
        self._title.set_in_layout(False)      # placed by hand: tight_layout would fit the axes around it
        self._show(rows, title)

    def _layout(self):
        self.fig.tight_layout(rect=(0, 0, 1, 0.93))

    def _show(self, rows: dict, title: str) -> None:
        labels = list(rows)
        for ax, key, scale, fwd_bars, bwd_bars, texts in self._panels:
            fwd = [rows[lb].forward_part[key] / scale for lb in labels]
            bwd = [rows[lb].backward_part[key] / scale for lb in labels]
            for fb, bb, text, xi, f, b in zip(fwd_bars, bwd_bars, texts, range(len(labels)), fwd, bwd):
                fb.set_height(f)
                bb.set_y(f)
                bb.set_height(b)
                text.set_position((xi, f + b))
                text.set_text(f"{f + b:,.1f}")
            ax.set_ylim(0, 1.3 * max(f + b for f, b in zip(fwd, bwd)))  # room for the legend above the value labels
        self._title.set_text(title)

    def refresh(self, rows: dict, title: str = "") -> bool:
        if list(rows) != list(self.args["rows"]):
            return False
        self._show(rows, title)
        return True


def plot_backward_costs(rows: dict, title: str = ""):
    """Two panels, HBM bytes and FLOPs, forward and backward stacked, one bar per algorithm; ``rows`` maps a label
    to a :class:`flashsim.model.simulator.Traffic` computed with backward=True.

    Introduced in chapter 07.
    """
    return BackwardCostsPlot(rows=rows, title=title).fig


def plot_gradient_check(errors: dict, title: str = "relative error vs float64 autograd"):
    """Grouped bars (log scale) of max |grad − float64| / max |float64|, {source: {grad: rel error}}.

    Introduced in chapter 07.
    """
    from matplotlib.figure import Figure
    fig = Figure(figsize=(6.4, 3.4))
    ax = fig.add_subplot()
    sources = list(errors)
    names = list(next(iter(errors.values())))
    w = 0.8 / len(sources)
    for s_i, src in enumerate(sources):
        vals = [max(errors[src][nm], 1e-17) for nm in names]
        ax.bar(np.arange(len(names)) + s_i * w - 0.4 + w / 2, vals, w, label=src)
    for level, label, style in ((2.0 ** -24, "fp32 unit roundoff 2⁻²⁴", ":"), (2.0 ** -11, "TF32 unit roundoff 2⁻¹¹", "--")):
        ax.axhline(level, color="grey", linestyle=style, linewidth=1, label=label)  # in the legend: no text on bars
    ax.set_yscale("log")
    ax.set_xticks(np.arange(len(names)), names)
    ax.set_ylabel("relative error")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def figure_backward_recompute():
    """figures/backward_recompute.png

    Forward + backward at N=4096, d=64, fp16: standard attention (stores P) against FlashAttention (recomputes P),
    bytes and FLOPs.

    Introduced in chapter 07.
    """
    return plot_backward_costs(backward_cost_rows(4096, 64), title="forward + backward, N=4096, d=64, fp16")
