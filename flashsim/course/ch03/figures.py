"""Chapter 03 figures: the tile set against the SRAM, and HBM traffic of the tiled QKᵀ against the block size."""
from __future__ import annotations

import numpy as np

from flashsim.course.ch03.tiling import BLOCK_CHOICES, qkt_tile_set, tiled_qkt_bytes
from flashsim.course.kit.plotting import LivePlot

__all__ = ["TilingPlot", "plot_tiling", "tiling_plot_args", "figure_tiling"]

_TILE_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd"]
_RED, _OK = "#d62728", "#2ca02c"


class TilingPlot(LivePlot):
    """Left: the tile set (bytes per tile, stacked) against the SRAM capacity. Right: HBM bytes of the tiled QKᵀ
    against Br (``hbm_bytes`` at each of ``block_rs``; crosses where the tile set does not fit), the current Br
    marked. Every control changes the artists in place (chapter 03)."""

    figsize = (8.4, 3.8)

    def draw(self, fig, tile_set, sram_bytes, block_rs, hbm_bytes, fits, block_r, title="", tile_top_bytes=0):
        from matplotlib.ticker import MaxNLocator
        gs = fig.add_gridspec(1, 3)
        ax = self._left = fig.add_subplot(gs[0, 0])
        self._tiles = [ax.bar([0], [0.0], color=color, label=name, width=0.6)[0]
                       for name, color in zip(tile_set, _TILE_COLORS)]
        self._sram = ax.axhline(0.0, color="k", ls="--", lw=1.5)
        self._sram_text = ax.text(0.35, 0.0, "", fontsize=8, va="bottom")
        ax.set_xlim(-0.5, 1.2)
        ax.set_xticks([])
        # the left y axis moves with the tile set and the SRAM, so it is animated (drawn with every frame): few
        # ticks, and its label a text of its own in the background (glyphs are what a frame costs most to draw)
        ax.yaxis.set_major_locator(MaxNLocator(nbins=4))
        ax.text(-0.3, 0.5, "KiB on chip", rotation=90, transform=ax.transAxes, ha="center", va="center")
        self._verdict = ax.set_title("", fontsize=10)
        # below the axes: inside, the legend sat on the stacked bar
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.02), ncol=1, frameon=False)
        ax = self._right = fig.add_subplot(gs[0, 1:])
        brs = np.asarray(block_rs, dtype=np.float64)
        (self._line,) = ax.semilogx(brs, brs, "-", color="#1f77b4", base=2)
        (self._fit,) = ax.plot([], [], "o", color="#1f77b4", label="tile set fits")
        (self._nofit,) = ax.plot([], [], "x", color=_RED, ms=9, label="does not fit")
        (self._cur,) = ax.plot([], [], "s", mfc="none", mec="k", ms=14, label="the slider's Br")
        ax.set_xlabel("Br (rows of Q kept in SRAM)")
        ax.set_ylabel("HBM MiB (read + written)")
        # the title's fixed line in the background, its changing line (the problem) an animated text under it
        ax.set_title("tiled S = QKᵀ: bigger resident blocks, fewer re-reads", fontsize=9, pad=16)
        self._title = ax.text(0.5, 1.0, "", transform=ax.transAxes, ha="center", va="bottom", fontsize=9)
        self._title.set_y(1.015)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        # the left y axis is animated too: a tile set or SRAM past the next power of two moves its top in a blit
        self.animate(*self._tiles, self._sram, self._sram_text, self._verdict, self._left.yaxis, self._line,
                     self._fit, self._nofit, self._cur, self._title)
        self._show(tile_set, sram_bytes, block_rs, hbm_bytes, fits, block_r, title, tile_top_bytes)

    def _show(self, tile_set, sram_bytes, block_rs, hbm_bytes, fits, block_r, title, tile_top_bytes=0):
        bottom = 0.0
        for rect, nbytes in zip(self._tiles, tile_set.values()):
            rect.set_y(bottom)
            rect.set_height(nbytes / 1024)
            bottom += nbytes / 1024
        over = bottom * 1024 > sram_bytes
        color = _RED if over else "k"
        self._sram.set_ydata([sram_bytes / 1024] * 2)
        self._sram.set_color(color)
        self._sram_text.set_y(sram_bytes / 1024)
        self._sram_text.set_text(f"SRAM {sram_bytes / 1024:.0f} KiB")
        self._sram_text.set_color(color)
        # the top: the larger of the tile set and the SRAM, rounded up to a power of two (and at least
        # tile_top_bytes), so that most moves of Br, Bc and the SRAM keep the axis (and can be blitted)
        top = 2 ** np.ceil(np.log2(max(bottom, sram_bytes / 1024, tile_top_bytes / 1024, 1e-9)))
        self._left.set_ylim(0, top * 1.15 if top > 0 else 1.0)
        self._verdict.set_text("does NOT fit" if over else "fits")
        self._verdict.set_color(_RED if over else _OK)
        brs = np.asarray(block_rs, dtype=np.float64)
        ys = np.asarray(hbm_bytes, dtype=np.float64) / 2**20
        ok = np.asarray(fits, dtype=bool)
        self._line.set_ydata(ys)
        self._fit.set_data(brs[ok], ys[ok])
        self._nofit.set_data(brs[~ok], ys[~ok])
        self._cur.set_data([block_r], [ys[list(block_rs).index(block_r)]])
        self._title.set_text(title)
        self._right.relim()
        self._right.autoscale_view()

    def refresh(self, tile_set, sram_bytes, block_rs, hbm_bytes, fits, block_r, title="", tile_top_bytes=0):
        if list(tile_set) != list(self.args["tile_set"]) or list(block_rs) != list(self.args["block_rs"]):
            return False
        self._show(tile_set, sram_bytes, block_rs, hbm_bytes, fits, block_r, title, tile_top_bytes)
        return True


def plot_tiling(tile_set: dict, sram_bytes: int, block_rs, hbm_bytes, fits, block_r: int, title: str = ""):
    """:class:`TilingPlot` as a Figure (chapter 03)."""
    return TilingPlot(tile_set=tile_set, sram_bytes=sram_bytes, block_rs=list(block_rs), hbm_bytes=list(hbm_bytes),
                      fits=list(fits), block_r=block_r, title=title).fig


def tiling_plot_args(n: int, d: int, sram_bytes: int, block_r: int, block_c: int, dtype: str, block_rs) -> dict:
    """The arguments of :class:`TilingPlot` for a tiled QKᵀ problem, every Br of `block_rs` evaluated."""
    hbm = []
    for b in block_rs:
        by = tiled_qkt_bytes(n, d, b, block_c, dtype)
        hbm.append(sum(by["read"].values()) + sum(by["write"].values()))
    fits = [sum(qkt_tile_set(b, block_c, d, dtype).values()) <= sram_bytes for b in block_rs]
    return {"tile_set": qkt_tile_set(block_r, block_c, d, dtype), "sram_bytes": sram_bytes,
            "block_rs": list(block_rs), "hbm_bytes": hbm, "fits": fits, "block_r": block_r,
            "title": f"N = {n}, d = {d}, Bc = {block_c}, {dtype}"}


def figure_tiling():
    """figures/tiling_qkt.png"""
    return TilingPlot(**tiling_plot_args(4096, 64, 100 * 1024, 128, 64, "fp16", BLOCK_CHOICES)).fig
