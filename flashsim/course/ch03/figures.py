"""Chapter 03 figures: the tile set against the SRAM, and HBM traffic of the tiled QKᵀ against the block size."""
from __future__ import annotations

import numpy as np

__all__ = ["plot_tiling", "figure_tiling"]


def plot_tiling(tile_set: dict, sram_bytes: int, block_rs, hbm_bytes, fits, block_r: int, title: str = ""):
    """Left: the tile set (bytes per tile, stacked) against the SRAM capacity. Right: HBM bytes of the tiled QKᵀ
    against Br (``hbm_bytes`` at each of ``block_rs``; crosses where the tile set does not fit), the current Br
    marked. Returns a Figure (chapter 03)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8.4, 3.6))
    gs = fig.add_gridspec(1, 3)
    ax = fig.add_subplot(gs[0, 0])
    bottom = 0.0
    colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd"]
    for (name, nbytes), color in zip(tile_set.items(), colors):
        ax.bar([0], [nbytes / 1024], bottom=bottom, color=color, label=name, width=0.6)
        bottom += nbytes / 1024
    over = bottom * 1024 > sram_bytes
    ax.axhline(sram_bytes / 1024, color="#d62728" if over else "k", ls="--", lw=1.5)
    ax.text(0.35, sram_bytes / 1024, f"SRAM {sram_bytes / 1024:.0f} KiB", fontsize=8, va="bottom",
            color="#d62728" if over else "k")
    ax.set_xlim(-0.5, 1.2)
    ax.set_xticks([])
    ax.set_ylabel("KiB on chip")
    ax.set_title("does NOT fit" if over else "fits", fontsize=10, color="#d62728" if over else "#2ca02c")
    ax.legend(fontsize=7, loc="upper right")
    ax = fig.add_subplot(gs[0, 1:])
    brs = np.asarray(block_rs, dtype=np.float64)
    ys = np.asarray(hbm_bytes, dtype=np.float64) / 2**20
    fits = np.asarray(fits, dtype=bool)
    ax.semilogx(brs, ys, "-", color="#1f77b4", base=2)
    ax.plot(brs[fits], ys[fits], "o", color="#1f77b4", label="tile set fits")
    ax.plot(brs[~fits], ys[~fits], "x", color="#d62728", ms=9, label="does not fit")
    cur = list(block_rs).index(block_r)
    ax.plot([block_r], [ys[cur]], "s", mfc="none", mec="k", ms=14, label=f"Br = {block_r}")
    ax.set_xlabel("Br (rows of Q kept in SRAM)")
    ax.set_ylabel("HBM MiB (read + written)")
    ax.set_title("tiled S = QKᵀ: bigger resident blocks, fewer re-reads" + (f"\n{title}" if title else ""),
                 fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def figure_tiling():
    """figures/tiling_qkt.png"""
    from flashsim.course.ch03.dashboards import TilingDashboard
    return TilingDashboard(n=4096, d=64, sram_kib=100, block_r=128, block_c=64).figure()
