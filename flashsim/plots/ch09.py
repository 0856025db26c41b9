"""Chapter 09 figures: why the speedup is real. Every function returns a matplotlib Figure (Agg-safe: no pyplot).

:func:`plot_comparisons_side_by_side` (measured vs simulated IO of several kernels, from
:func:`flashsim.real_gpu.compare`) is introduced here and reused by chapter 11.
"""
from __future__ import annotations

import numpy as np

__all__ = ["plot_comparisons_side_by_side"]


def _figure(figsize):
    from matplotlib.figure import Figure
    return Figure(figsize=figsize)


def plot_comparisons_side_by_side(comparisons: dict):
    """One panel per {label: flashsim.real_gpu.Comparison}: measured next to simulated bytes (log scale)."""
    fig = _figure((4.2 * len(comparisons), 3.4))
    axes = np.atleast_1d(fig.subplots(1, len(comparisons), sharey=True))
    for ax, (label, c) in zip(axes, comparisons.items()):
        rows = c.rows()
        xs = np.arange(len(rows))
        meas = [(r[1] or 0) for r in rows]
        sim = [(r[2] or 0) for r in rows]
        ax.bar(xs - 0.2, meas, 0.4, label=f"measured ({c.backend})", color="#d62728")
        ax.bar(xs + 0.2, sim, 0.4, label="simulated", color="#1f77b4")
        ax.set_xticks(xs, [r[0].replace(" (after L2)", "\n(after L2)") for r in rows], fontsize=8)
        ax.set_yscale("log")
        ax.set_title(label, fontsize=9)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("bytes")
    fig.tight_layout()
    return fig
