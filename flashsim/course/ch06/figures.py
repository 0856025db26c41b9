"""Chapter 06 figures: measured peak memory vs N (slopes 2 and 1), and memory vs context length against a GPU's
capacity. Every function returns a matplotlib Figure (Agg-safe: no pyplot)."""
from __future__ import annotations

import numpy as np

from flashsim.course.kit.plotting import LivePlot, new_figure
from flashsim.model.attention.memory_model import attention_memory_bytes, max_context_for
from flashsim.model.hardware import HBM_CAPACITY_BYTES

__all__ = ["ContextMemoryPlot", "plot_peak_memory", "plot_context_memory", "context_memory_args",
           "figure_context_memory"]


def plot_peak_memory(measured: dict, title: str = ""):
    """Log-log peak memory vs N: measured (markers) and modelled (dashed, where the dict has a model), naive and
    flash, from :func:`flashsim.widgets.measure_peak_memory` or :func:`flashsim.course.kit.real_gpu.kernel_memory`.

    Introduced in chapter 06.
    """
    fig = new_figure((6.4, 4))
    ax = fig.add_subplot()
    ns = np.asarray(measured["ns"], float)
    for key, color, label in (("naive", "#d62728", "naive (S materialized)"), ("flash", "#1f77b4", "flash")):
        y = np.asarray(measured[key], float)
        # the fitted log-log slope goes in the legend (an annotation at the last point ran off the axes)
        slope = f" (slope {np.polyfit(np.log(ns), np.log(np.maximum(y, 1)), 1)[0]:.2f})" if len(ns) > 1 else ""
        ax.plot(ns, y / 1e6, "o-", color=color, label=f"{label}: measured{slope}")
        if measured.get(key + "_model") is not None:
            ax.plot(ns, np.asarray(measured[key + "_model"], float) / 1e6, "--", color=color, alpha=0.6,
                    label=f"{label}: model")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length N")
    ax.set_ylabel("peak memory growth (MB)")
    ax.set_title(title or measured.get("backend", ""), fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


class ContextMemoryPlot(LivePlot):
    """Memory of one attention layer vs N for each algorithm, the device capacity, and the longest N that fits;
    every control moves the curves and markers in place.

    Introduced in chapter 06.
    """

    figsize = (6.4, 4)
    _COLORS = {"naive": "#d62728", "flash": "#1f77b4"}
    _NAMES = {"naive": "standard (S, P in HBM)", "flash": "FlashAttention"}

    def draw(self, fig, ns, curves, capacity_bytes, max_n, title=""):
        ax = self._ax = fig.add_subplot()
        self._curves, self._limits = {}, {}
        for algo, ys in curves.items():
            color = self._COLORS.get(algo)
            (self._curves[algo],) = ax.plot(ns, np.asarray(ys, float) / 1e9, color=color,
                                            label=self._NAMES.get(algo, algo))
            if algo in max_n:
                self._limits[algo] = (ax.axvline(max_n[algo], color=color, linestyle=":", linewidth=1),
                                      ax.text(max_n[algo], 0, "", rotation=90, fontsize=7, color=color,
                                              ha="right", va="bottom"))
        self._cap = ax.axhline(capacity_bytes / 1e9, color="black", linewidth=1)
        self._cap_text = ax.text(ns[0], capacity_bytes / 1e9, "", fontsize=8, va="bottom")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length N")
        ax.set_ylabel("memory of one attention layer (GB)")
        self._title = ax.set_title("", fontsize=9)
        ax.legend(fontsize=8, loc="lower right")
        self.animate(*self._curves.values(), *(a for pair in self._limits.values() for a in pair), self._cap,
                     self._cap_text, self._title)
        self._show(ns, curves, capacity_bytes, max_n, title)

    def _show(self, ns, curves, capacity_bytes, max_n, title):
        cap = capacity_bytes / 1e9
        for algo, ys in curves.items():
            self._curves[algo].set_ydata(np.asarray(ys, float) / 1e9)
        for algo, (line, text) in self._limits.items():
            line.set_xdata([max_n[algo]] * 2)
            text.set_position((max_n[algo], cap * 1.3))
            text.set_text(f"N ≤ {max_n[algo]:,}")
        self._cap.set_ydata([cap] * 2)
        self._cap_text.set_y(cap)
        self._cap_text.set_text(f" device memory {cap:.0f} GB")
        self._title.set_text(title)
        self._ax.relim()
        self._ax.autoscale_view(scaley=False)
        # fixed bottom, top set by the device: moving heads × batch or d keeps the axes (and can be blitted)
        self._ax.set_ylim(1e-4, cap * 1e3)

    def refresh(self, ns, curves, capacity_bytes, max_n, title=""):
        if list(ns) != list(self.args["ns"]) or list(curves) != list(self.args["curves"]) or (
                set(max_n) != set(self.args["max_n"])):
            return False
        self._show(ns, curves, capacity_bytes, max_n, title)
        return True


def plot_context_memory(ns, curves: dict, capacity_bytes: float, max_n: dict, title: str = ""):
    """:class:`ContextMemoryPlot` as a Figure. Introduced in chapter 06."""
    return ContextMemoryPlot(ns=list(ns), curves=curves, capacity_bytes=capacity_bytes, max_n=max_n, title=title).fig


#: the sequence lengths of the context-memory plot (2^9 ... 2^24)
CONTEXT_NS = tuple(int(n) for n in np.unique(np.logspace(9, 24, 61, base=2).astype(np.int64)))


def context_memory_args(device: str, batch_heads: int, d: int, elem_bytes: int = 2) -> dict:
    """The arguments of :class:`ContextMemoryPlot` from the memory model, for one device and problem."""
    cap = HBM_CAPACITY_BYTES[device]
    curves = {a: [attention_memory_bytes(a, n, d, batch_heads, elem_bytes) for n in CONTEXT_NS]
              for a in ("naive", "flash")}
    max_n = {a: max_context_for(cap, a, d, batch_heads, elem_bytes) for a in ("naive", "flash")}
    return {"ns": list(CONTEXT_NS), "curves": curves, "capacity_bytes": cap, "max_n": max_n,
            "title": f"one attention layer on {device}: heads×batch = {batch_heads}, d={d}"}


def figure_context_memory():
    """figures/context_memory.png

    One attention layer's memory vs N on an H200 (141 GB), 32 heads × batch, d=128, bf16: standard attention's N²
    against FlashAttention's N.

    Introduced in chapter 06.
    """
    return ContextMemoryPlot(**context_memory_args("h200", 32, 128)).fig
