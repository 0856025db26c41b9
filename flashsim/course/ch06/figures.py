"""Chapter 06 figures: measured peak memory vs N (slopes 2 and 1), and memory vs context length against a GPU's
capacity. Every function returns a matplotlib Figure (Agg-safe: no pyplot)."""
from __future__ import annotations

import numpy as np

__all__ = ["plot_peak_memory", "plot_context_memory", "figure_context_memory"]


def plot_peak_memory(measured: dict, title: str = ""):
    """Log-log peak memory vs N: measured (markers) and modelled (dashed), naive and flash, from
    :func:`flashsim.widgets.measure_peak_memory`.

    Introduced in chapter 06.
    """
    from matplotlib.figure import Figure
    fig = Figure(figsize=(6.4, 4))
    ax = fig.add_subplot()
    ns = np.asarray(measured["ns"], float)
    for key, color, label in (("naive", "#d62728", "naive (S materialized)"), ("flash", "#1f77b4", "flash")):
        y = np.asarray(measured[key], float)
        # the fitted log-log slope goes in the legend (an annotation at the last point ran off the axes)
        slope = f" (slope {np.polyfit(np.log(ns), np.log(np.maximum(y, 1)), 1)[0]:.2f})" if len(ns) > 1 else ""
        ax.plot(ns, y / 1e6, "o-", color=color, label=f"{label}: measured{slope}")
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


def plot_context_memory(ns, curves: dict, capacity_bytes: float, max_n: dict, title: str = ""):
    """Memory of one attention layer vs N for each algorithm, the device capacity, and the longest N that fits.

    Introduced in chapter 06.
    """
    from matplotlib.figure import Figure
    fig = Figure(figsize=(6.4, 4))
    ax = fig.add_subplot()
    colors = {"naive": "#d62728", "flash": "#1f77b4"}
    names = {"naive": "standard (S, P in HBM)", "flash": "FlashAttention"}
    for algo, ys in curves.items():
        ax.plot(ns, np.asarray(ys, float) / 1e9, color=colors.get(algo), label=names.get(algo, algo))
        if algo in max_n:
            ax.axvline(max_n[algo], color=colors.get(algo), linestyle=":", linewidth=1)
            ax.text(max_n[algo], capacity_bytes / 1e9 * 1.3, f"N ≤ {max_n[algo]:,}", rotation=90, fontsize=7,
                    color=colors.get(algo), ha="right", va="bottom")
    ax.axhline(capacity_bytes / 1e9, color="black", linewidth=1)
    ax.text(ns[0], capacity_bytes / 1e9, f" device memory {capacity_bytes / 1e9:.0f} GB", fontsize=8, va="bottom")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_ylim(top=capacity_bytes / 1e9 * 1e3)
    ax.set_xlabel("sequence length N")
    ax.set_ylabel("memory of one attention layer (GB)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def figure_context_memory():
    """figures/context_memory.png

    One attention layer's memory vs N on an H200 (141 GB), 32 heads × batch, d=128, bf16: standard attention's N²
    against FlashAttention's N.

    Introduced in chapter 06.
    """
    from flashsim.course.ch06.dashboards import ContextMemoryDashboard
    return ContextMemoryDashboard(device="h200", batch_heads=32, d=128).figure()
