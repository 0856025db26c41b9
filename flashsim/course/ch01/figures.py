"""Chapter 01 figures: the roofline of each device preset, and the sizes of its memory levels."""
from __future__ import annotations

import numpy as np

from flashsim.course.ch00.figures import format_bytes
from flashsim.course.kit.plotting import LivePlot, new_figure
from flashsim.model.hardware import HBM_CAPACITY_BYTES, PRESETS, get_device
from flashsim.model.roofline import peak_flops

__all__ = ["RooflinePlot", "plot_roofline", "plot_memory_levels", "figure_roofline_presets", "figure_memory_levels"]

_COLORS = {"h200": "#d62728", "h100": "#9467bd", "a100": "#1f77b4", "rtx4090": "#2ca02c", "t4": "#ff7f0e",
           "cpu": "#7f7f7f"}


class RooflinePlot(LivePlot):
    """Attainable FLOP/s = min(peak, I × HBM bandwidth) against arithmetic intensity I, log-log, one roof per
    device preset (chapter 01). `highlight` draws one preset bold with its ridge point; `points` is a list of
    (label, intensity) placed on the highlighted roof (e.g. standard attention vs FlashAttention); `intensity`
    draws a vertical marker (the dashboard's slider), which moves in place."""

    figsize = (7, 4.2)

    def draw(self, fig, devices, dtype, highlight, points, intensity):
        xs = np.logspace(-1, 4, 200)
        ax = self._ax = fig.add_subplot()
        for name in devices:
            hw = get_device(name)
            peak, bw = peak_flops(hw, dtype), hw.hbm_bandwidth_bytes_per_s
            bold = highlight is None or name == highlight
            ax.loglog(xs, np.minimum(peak, xs * bw), color=_COLORS.get(name, "k"), lw=2.5 if bold else 1,
                      alpha=1.0 if bold else 0.35, label=f"{hw.name} (ridge {peak / bw:.0f} FLOP/B)")
            if name == highlight:
                ax.plot([peak / bw], [peak], "s", color=_COLORS.get(name, "k"))
        self._marker = None
        if highlight is not None:
            hw = get_device(highlight)
            peak, bw = peak_flops(hw, dtype), hw.hbm_bandwidth_bytes_per_s
            for j, (label, inten) in enumerate(points or []):
                y = min(peak, inten * bw)
                ax.plot([inten], [y], "o", color="k", ms=7)
                # alternate below-right / above-left of the roof so that two nearby points' labels do not overlap
                below = j % 2 == 0
                ax.annotate(f"{label}\n{inten:.0f} FLOP/B", (inten, y), textcoords="offset points",
                            xytext=(8, -26) if below else (-8, 8), ha="left" if below else "right", fontsize=8)
            if intensity is not None:
                self._vline = ax.axvline(intensity, color="k", ls=":", lw=1)
                (self._marker,) = ax.plot([intensity], [min(peak, intensity * bw)], "D", color="k", ms=6)
                self._peak_bw = (peak, bw)
                self.animate(self._vline, self._marker)
        ax.set_xlabel("arithmetic intensity I (FLOP per HBM byte)")
        ax.set_ylabel(f"attainable FLOP/s ({dtype} matmul)")
        ax.set_title("The roofline: memory-bound left of the ridge, compute-bound right of it", fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")

    def refresh(self, devices, dtype, highlight, points, intensity):
        old = self.args
        if (self._marker is None or intensity is None
                or (tuple(devices), dtype, highlight, list(points or [])) !=
                (tuple(old["devices"]), old["dtype"], old["highlight"], list(old["points"] or []))):
            return False
        peak, bw = self._peak_bw
        self._vline.set_xdata([intensity, intensity])
        self._marker.set_data([intensity], [min(peak, intensity * bw)])
        return True


def plot_roofline(devices=("h200", "h100", "a100", "rtx4090", "t4"), dtype: str = "fp16", highlight: str | None = None,
                  points=None, intensity: float | None = None):
    """:class:`RooflinePlot` as a Figure (chapter 01)."""
    return RooflinePlot(devices=tuple(devices), dtype=dtype, highlight=highlight, points=points,
                        intensity=intensity).fig


def plot_memory_levels(device: str = "h200"):
    """Capacity of each memory level of a preset (SRAM of one SM, SRAM of all SMs, L2), log scale, with the
    one-head N×N fp16 score matrix at N = 1024, 8192 for scale (chapter 01). Returns a Figure."""
    hw = get_device(device)
    levels = [("SRAM, one SM", hw.sram_bytes), (f"SRAM, all {hw.num_sms} SMs", hw.sram_bytes * hw.num_sms),
              ("L2 cache", hw.l2_bytes), ("S at N=1024 (fp16)", 1024 * 1024 * 2), ("S at N=8192 (fp16)", 8192 ** 2 * 2)]
    fig = new_figure((6.4, 3.0))
    ax = fig.add_subplot()
    colors = ["#2ca02c", "#2ca02c", "#ff7f0e", "#7f7f7f", "#7f7f7f"]
    ax.barh([l for l, _ in levels], [v for _, v in levels], color=colors)
    for i, (_, v) in enumerate(levels):
        ax.text(v * 1.1, i, f"{v / 2**20:,.2f} MiB" if v >= 2**20 else f"{v / 1024:,.0f} KiB", va="center", fontsize=8)
    ax.set_xscale("log")
    ax.invert_yaxis()
    ax.set_xlabel("bytes")
    hbm = HBM_CAPACITY_BYTES.get(device)
    ax.set_title(f"{hw.name}: on-chip memory is small"
                 + (f" (device memory: {format_bytes(hbm)})" if hbm else " (device memory is tens of GB or more)"),
                 fontsize=10)
    fig.tight_layout()
    return fig


def figure_roofline_presets():
    """figures/roofline_presets.png"""
    return plot_roofline(tuple(PRESETS), highlight=None)


def figure_memory_levels():
    """figures/memory_levels_h200.png"""
    return plot_memory_levels("h200")
