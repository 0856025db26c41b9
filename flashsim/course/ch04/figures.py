"""Chapter 04 figures: the online softmax block by block, and fp16 overflow without the max subtracted."""
from __future__ import annotations

import math

import numpy as np

__all__ = ["plot_online_softmax", "plot_fp16_overflow", "figure_online_softmax", "figure_fp16_overflow"]


def plot_online_softmax(state: dict):
    """Left: the row's scores, blocks read so far coloured, the current block highlighted, the running max as a
    line. Right: the running l after each block read so far, against the one-shot l (dashed). State from
    :class:`flashsim.widgets.OnlineSoftmaxStepper`. Returns a Figure (chapter 04)."""
    from matplotlib.figure import Figure

    x = np.asarray(state["scores"], dtype=np.float64)
    b, step = state["block"], state["step"]
    fig = Figure(figsize=(8.4, 3.4))
    ax, ax2 = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.4, 1.0]})
    colors = []
    for i in range(len(x)):
        blk = i // b
        colors.append("#d62728" if blk == step else ("#1f77b4" if blk < step else "#d9d9d9"))
    ax.bar(np.arange(len(x)), x, color=colors)
    for k in range(1, -(-len(x) // b)):
        ax.axvline(k * b - 0.5, color="k", lw=0.6, ls=":")
    ax.axhline(state["m"], color="#2ca02c", lw=1.5, label=f"running max m = {state['m']:g}")
    ax.set_xticks(np.arange(len(x)))
    ax.set_xlabel("score index (blocks of %d)" % b)
    ax.set_ylabel("score")
    ax.set_title(f"block {step + 1}/{state['n_blocks']} read (red)", fontsize=9)
    ax.legend(fontsize=8, loc="upper left")
    ls = [l for _, l in state["history"]]
    ax2.plot(np.arange(1, len(ls) + 1), ls, "o-", color="#1f77b4" if state["rescale"] else "#d62728",
             label="running l" + ("" if state["rescale"] else " (no rescale: bug)"))
    ax2.axhline(state["exact_l"], color="k", ls="--", lw=1, label=f"one-shot l = {state['exact_l']:.4f}")
    for k, l in enumerate(ls, 1):
        ax2.annotate(f"{l:.3f}", (k, l), textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax2.set_xlim(0.5, state["n_blocks"] + 0.5)
    ax2.set_xticks(np.arange(1, state["n_blocks"] + 1))
    ax2.set_xlabel("blocks read")
    ax2.set_ylabel("l = Σ e^(x − m)")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_fp16_overflow(row=None, dtype: str = "fp16"):
    """Chapter 04: e^x as fp16 stores it against x: finite up to x = ln 65504 ≈ 11.09, inf beyond. The scores of `row` are
    marked with e^x (red where it overflows) and with e^(x − max) (green, always ≤ 1). Returns a Figure."""
    from matplotlib.figure import Figure
    from flashsim.model.dtypes import round_to

    xs = np.linspace(0, 20, 400)
    with np.errstate(over="ignore"):
        stored = round_to(np.exp(xs).astype(np.float32), dtype)
    fig = Figure(figsize=(6.8, 3.4))
    ax = fig.add_subplot()
    fin = np.isfinite(stored)
    ax.semilogy(xs[fin], stored[fin], color="#1f77b4", label=f"e^x stored in {dtype}")
    lim = math.log(65504.0)
    ax.axvline(lim, color="#d62728", ls="--", lw=1)
    ax.text(lim + 0.2, 1e7, f"x = ln 65504 ≈ {lim:.2f}: e^x = inf beyond", color="#d62728", fontsize=8)
    if row is not None:
        r = np.asarray(row, dtype=np.float64)
        with np.errstate(over="ignore"):
            er = round_to(np.exp(r).astype(np.float32), dtype)
        ok = np.isfinite(er)
        ax.plot(r[ok], er[ok], "o", color="#1f77b4", ms=5)
        ax.plot(r[~ok], np.full((~ok).sum(), 65504.0), "x", color="#d62728", ms=9, label="e^x = inf (overflow)")
        ax.plot(r, round_to(np.exp(r - r.max()).astype(np.float32), dtype), "o", color="#2ca02c", ms=5,
                label="e^(x − max x) ≤ 1")
    ax.set_xlabel("x (score)")
    ax.set_ylabel("value")
    ax.set_ylim(1e-4, 1e9)
    ax.set_xlim(0, 20)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title("Why the max is subtracted: fp16 overflows at 65504", fontsize=10)
    fig.tight_layout()
    return fig


def figure_online_softmax():
    """figures/online_softmax_worked_example.png"""
    from flashsim.course.ch04.dashboards import OnlineSoftmaxStepper
    s = OnlineSoftmaxStepper()
    s.update(step=1)
    return s.figure()


def figure_fp16_overflow():
    """figures/fp16_overflow.png"""
    return plot_fp16_overflow(list(np.linspace(5, 12, 8)))
