"""Chapter 11 figures: four pitfalls. Every function returns a matplotlib Figure (Agg-safe: no pyplot)."""
from __future__ import annotations

import numpy as np

from flashsim.course.kit.plotting import new_figure

__all__ = ["plot_speedup_vs_n", "plot_mismatch_rows", "plot_flops_vs_n", "plot_rescale_drift",
           "figure_short_sequence_speedup"]


def plot_speedup_vs_n(sweep: dict, current: dict | None = None, title: str = ""):
    """Predicted speedup of flash2 over naive against N: the attention core, and the whole layer (Amdahl)."""
    fig = new_figure((6.8, 3.4))
    ax = fig.add_subplot()
    ax.plot(sweep["n"], sweep["core_speedup"], "--o", color="#7f7f7f", label="attention core")
    ax.plot(sweep["n"], sweep["layer_speedup"], "-o", color="#1f77b4", label="whole layer (+ projections, MLP)")
    if current is not None:
        ax.plot([current["n"]], [current["core_speedup"]], "o", color="#d62728", ms=9)
        ax.plot([current["n"]], [current["layer_speedup"]], "o", color="#d62728", ms=9, label=f"N = {current['n']}")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length N")
    ax.set_ylabel("naive time / flash time")
    ax.set_ylim(bottom=0)
    import textwrap
    ax.set_title("\n".join(textwrap.wrap(title, 100)), fontsize=8)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_mismatch_rows(result: dict):
    """Max |flash − reference| per query row (log scale), with the plain-implementation rounding level."""
    fig = new_figure((6.8, 3.2))
    ax = fig.add_subplot()
    row = np.maximum(np.asarray(result["row_error"]), 1e-12)
    ax.semilogy(np.arange(row.size), row, color="#d62728", lw=1.2, label="max |flash − reference| in the row")
    ax.axhline(result["plain_max"], color="#7f7f7f", ls="--", label="rounding of a plain implementation")
    ax.set_xlabel("query row")
    ax.set_ylabel("error")
    c = result["config"]
    ref = c["ref_dtype"] or "float64"
    ax.set_title(f"kernel: {c['flash_dtype']}, causal={c['flash_causal']}   reference: {ref}, "
                 f"causal={c['ref_causal']}", fontsize=9)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig


def plot_flops_vs_n(sweep: dict):
    """FLOPs and HBM bytes of naive and flash2 against N (log-log): FLOPs are the same N² for both."""
    from matplotlib.ticker import NullLocator
    fig = new_figure((7.6, 3.2))
    ax1, ax2 = fig.subplots(1, 2)
    n = np.asarray(sweep["n"], float)
    ax1.loglog(n, sweep["naive"], "o-", label="naive", color="#7f7f7f")
    ax1.loglog(n, sweep["flash"], "x--", label="flash2", color="#1f77b4")
    ax1.loglog(n, 4 * n**2 * sweep["d"] * (0.5 if sweep["causal"] else 1), ":", color="k", label="4·N²·d")
    ax1.set_xlabel("N")
    ax1.set_ylabel("matmul FLOPs (one head)")
    ax1.set_title("FLOPs: identical, Θ(N²)", fontsize=9)
    ax1.legend(fontsize=8)
    ax2.loglog(n, sweep["naive_hbm"], "o-", label="naive", color="#7f7f7f")
    ax2.loglog(n, sweep["flash_hbm"], "x--", label="flash2", color="#1f77b4")
    ax2.set_xlabel("N")
    for ax in (ax1, ax2):  # tick at the swept N, not at 2×10³, 3×10³, … (they overlap)
        ax.set_xticks(list(n), [f"{int(x)}" for x in n], fontsize=7)
        ax.xaxis.set_minor_locator(NullLocator())
    ax2.set_ylabel("HBM bytes (one head)")
    ax2.set_title("bytes: fewer, but still Θ(N²d²/M)", fontsize=9)
    ax2.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_rescale_drift(drift: dict):
    """Error of one row's online attention after each block, with and without the rescale; blocks that raise the
    running max are marked."""
    fig = new_figure((6.8, 3.3))
    ax = fig.add_subplot()
    b = np.asarray(drift["blocks"])
    ok = np.maximum(np.asarray(drift["err_ok"]), 1e-17)
    bug = np.maximum(np.asarray(drift["err_bug"]), 1e-17)
    ax.semilogy(b, ok, "o-", color="#1f77b4", ms=3, label="with rescale")
    ax.semilogy(b, bug, "o-", color="#d62728", ms=3, label="rescale=False (the bug)")
    grows = np.asarray(drift["max_grows"])
    if grows.any():
        ax.semilogy(b[grows], bug[grows], "v", color="k", ms=6, label="block raised the running max")
    ax.set_xlabel("block")
    ax.set_ylabel("max |o − exact|")
    ax.set_title(f"one row, N={drift['n']}, block={drift['block']}, score trend={drift['trend']:g}", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def figure_short_sequence_speedup():
    """figures/ch11_short_sequence_speedup.png"""
    from flashsim.course.ch11.dashboards import SHORT_NS, short_sequence_times, speedup_sweep
    return plot_speedup_vs_n(speedup_sweep(SHORT_NS), current=short_sequence_times(512),
                             title="H200, d=64, 16 heads, batch 1: the win shrinks at short N")
