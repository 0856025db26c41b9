"""Chapter 04 figures: the online softmax block by block, and fp16 overflow without the max subtracted."""
from __future__ import annotations

import math

import numpy as np

from flashsim.course.ch04.stepping import ROWS, online_softmax_state
from flashsim.course.kit.plotting import LivePlot
from flashsim.model.dtypes import round_to

__all__ = ["OnlineSoftmaxPlot", "OverflowPlot", "plot_online_softmax", "plot_fp16_overflow", "figure_online_softmax",
           "figure_fp16_overflow"]


class OnlineSoftmaxPlot(LivePlot):
    """Left: the row's scores, blocks read so far coloured, the current block highlighted, the running max as a
    line. Right: the running l after each block read so far, against the one-shot l (dashed). State from
    :func:`flashsim.course.ch04.stepping.online_softmax_state`; a new step of the same row changes it in place
    (chapter 04). The right panel's x axis counts scores read, so a new block size keeps both axes (blitted)."""

    figsize = (8.4, 3.4)

    def draw(self, fig, state):
        x = np.asarray(state["scores"], dtype=np.float64)
        ax, ax2 = self._ax, self._ax2 = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.4, 1.0]})
        self._bars = ax.bar(np.arange(len(x)), x, color="#d9d9d9")
        # one dotted line per possible block boundary, shown where the current block size puts one
        self._bounds = [ax.axvline(k - 0.5, color="k", lw=0.6, ls=":") for k in range(1, len(x))]
        self._m = ax.axhline(state["m"], color="#2ca02c", lw=1.5, label="running max m")
        self._m_note = ax.text(len(x) - 0.5, state["m"], "", ha="right", va="bottom", fontsize=8, color="#2ca02c")
        ax.set_xticks(np.arange(len(x)))
        ax.set_xlabel("score index")
        ax.set_ylabel("score")
        self._title = ax.set_title("", fontsize=9)
        ax.legend(fontsize=8, loc="upper left")
        bug = not state["rescale"]
        (self._l,) = ax2.plot([], [], "o-", color="#d62728" if bug else "#1f77b4",
                              label="running l" + (" (no rescale: bug)" if bug else ""))
        ax2.axhline(state["exact_l"], color="k", ls="--", lw=1, label=f"one-shot l = {state['exact_l']:.4f}")
        self._notes = []
        ax2.set_xlim(0, len(x) + 0.5)
        ax2.set_xticks(np.arange(0, len(x) + 1, max(1, len(x) // 8)))
        ax2.set_xlabel("scores read")
        ax2.set_ylabel("l = Σ e^(x − m)")
        ax2.legend(fontsize=7)
        lo, hi = state.get("l_range", (None, None))
        if lo is not None:      # the whole row's range of l: the axis does not rescale while the stepper plays
            pad = 0.12 * (hi - lo) if hi > lo else 0.1 * max(abs(hi), 1.0)
            ax2.set_ylim(lo - pad, hi + pad)
        self.animate(*self._bars, *self._bounds, self._m, self._m_note, self._title, self._l)
        self._show(state)

    def _show(self, state):
        b, step = state["block"], state["step"]
        for i, rect in enumerate(self._bars):
            blk = i // b
            rect.set_facecolor("#d62728" if blk == step else ("#1f77b4" if blk < step else "#d9d9d9"))
        for k, line in enumerate(self._bounds, 1):
            line.set_visible(k % b == 0)
        self._m.set_ydata([state["m"]] * 2)
        self._m_note.set_y(state["m"])
        self._m_note.set_text(f"m = {state['m']:g}")
        self._title.set_text(f"block {step + 1}/{state['n_blocks']} (blocks of {b}) read (red)")
        ls = [l for _, l in state["history"]]
        ks = np.minimum(np.arange(1, len(ls) + 1) * b, len(state["scores"]))   # scores read after each block
        self._l.set_data(ks, ls)
        for note in self._notes:
            note.remove()
            self.animated.remove(note)
        self._notes = [self._ax2.annotate(f"{l:.3f}", (k, l), textcoords="offset points", xytext=(4, 4), fontsize=8)
                       for k, l in zip(ks, ls)]
        self.animate(*self._notes)
        if "l_range" not in state:
            self._ax2.relim()
            self._ax2.autoscale_view(scalex=False)

    def refresh(self, state) -> bool:
        old = self.args["state"]
        if (old["scores"], old["rescale"]) != (state["scores"], state["rescale"]):
            return False      # the legend names the bug: redrawn
        self._show(state)
        return True


def plot_online_softmax(state: dict):
    """:class:`OnlineSoftmaxPlot` as a Figure (chapter 04)."""
    return OnlineSoftmaxPlot(state=state).fig


class OverflowPlot(LivePlot):
    """Chapter 04: e^x as fp16 stores it against x: finite up to x = ln 65504 ≈ 11.09, inf beyond. The scores of
    `row` are marked with e^x (red where it overflows) and with e^(x − max) (green, always ≤ 1); a new row moves
    the markers in place."""

    figsize = (6.8, 3.4)

    def draw(self, fig, row=None, dtype="fp16"):
        xs = np.linspace(0, 20, 400)
        with np.errstate(over="ignore"):
            stored = round_to(np.exp(xs).astype(np.float32), dtype)
        ax = fig.add_subplot()
        fin = np.isfinite(stored)
        ax.semilogy(xs[fin], stored[fin], color="#1f77b4", label=f"e^x stored in {dtype}")
        lim = math.log(65504.0)
        ax.axvline(lim, color="#d62728", ls="--", lw=1)
        ax.text(lim + 0.2, 1e7, f"x = ln 65504 ≈ {lim:.2f}: e^x = inf beyond", color="#d62728", fontsize=8)
        self._points = None
        if row is not None:
            self._points = (ax.plot([], [], "o", color="#1f77b4", ms=5)[0],
                            ax.plot([], [], "x", color="#d62728", ms=9, label="e^x = inf (overflow)")[0],
                            ax.plot([], [], "o", color="#2ca02c", ms=5, label="e^(x − max x) ≤ 1")[0])
            self.animate(*self._points)
            self._show(row, dtype)
        ax.set_xlabel("x (score)")
        ax.set_ylabel("value")
        ax.set_ylim(1e-4, 1e9)
        ax.set_xlim(0, 20)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
        ax.set_title("Why the max is subtracted: fp16 overflows at 65504", fontsize=10)

    def _show(self, row, dtype):
        r = np.asarray(row, dtype=np.float64)
        with np.errstate(over="ignore"):
            er = round_to(np.exp(r).astype(np.float32), dtype)
        ok = np.isfinite(er)
        fine, over, safe = self._points
        fine.set_data(r[ok], er[ok])
        over.set_data(r[~ok], np.full((~ok).sum(), 65504.0))
        safe.set_data(r, round_to(np.exp(r - r.max()).astype(np.float32), dtype))

    def refresh(self, row=None, dtype="fp16") -> bool:
        if row is None or self._points is None or dtype != self.args.get("dtype", "fp16"):
            return False
        self._show(row, dtype)
        return True


def plot_fp16_overflow(row=None, dtype: str = "fp16"):
    """:class:`OverflowPlot` as a Figure (chapter 04)."""
    return OverflowPlot(row=None if row is None else list(row), dtype=dtype).fig


def figure_online_softmax():
    """figures/online_softmax_worked_example.png"""
    return plot_online_softmax(online_softmax_state(ROWS["worked example [1, 3] then [2, 5]"], 2, 1))


def figure_fp16_overflow():
    """figures/fp16_overflow.png"""
    return plot_fp16_overflow(list(np.linspace(5, 12, 8)))
