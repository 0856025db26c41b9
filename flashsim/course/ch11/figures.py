"""Chapter 11 figures: four pitfalls. Every function returns a matplotlib Figure (Agg-safe: no pyplot)."""
from __future__ import annotations

import textwrap

import numpy as np

from flashsim.course.kit.plotting import LivePlot, new_figure
from flashsim.model.roofline import roofline
from flashsim.model.simulator import traffic

__all__ = ["plot_speedup_vs_n", "plot_mismatch_rows", "plot_flops_vs_n", "plot_rescale_drift",
           "figure_short_sequence_speedup"]


#: sequence lengths of the short-sequence sweep
SHORT_NS = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)


def short_sequence_times(n: int, d: int = 64, heads: int = 16, device: str = "h200") -> dict:
    """Predicted forward times of one transformer layer's attention core, naive vs flash2, and of the layer (ch. 11).

    * **attention core**: ``flashsim.traffic(..., l2=True).time_s``, the roofline time on the DRAM bytes that get
      past L2 (chapter 09), for naive (Algorithm 0) and flash2, `heads` heads of size `d`, batch 1;
    * **the rest of the layer**: the Q, K, V and output projections and the MLP (4× expansion) on
      d_model = heads·d: 24·N·d_model² matmul FLOPs, reading 12·d_model² fp16 weights and ~10·N·d_model
      activations, through the same roofline (:func:`flashsim.model.roofline.roofline`).

    Two effects shrink the win at short N: the core's byte ratio naive/flash is about 1 + N/d when one K/V pass
    suffices, and the core is a small part of the layer (Amdahl). Returns both Traffic, the times in seconds, the
    core speedup and the layer speedup.
    """
    naive = traffic("naive", n, d, heads=heads, device=device, l2=True)
    flash = traffic("flash2", n, d, heads=heads, device=device, l2=True)
    d_model = heads * d
    other = roofline(24 * n * d_model**2, 2 * (12 * d_model**2 + 10 * n * d_model), device)
    t_naive, t_flash, t_other = naive.time_s, flash.time_s, other.time_s
    return {"n": n, "d": d, "heads": heads, "device": device, "naive": naive, "flash": flash,
            "naive_s": t_naive, "flash_s": t_flash, "other_s": t_other,
            "core_speedup": t_naive / t_flash, "layer_speedup": (t_other + t_naive) / (t_other + t_flash),
            "attention_share_naive": t_naive / (t_other + t_naive)}


def speedup_sweep(ns=SHORT_NS, d: int = 64, heads: int = 16, device: str = "h200", progress: bool = True,
                  times=short_sequence_times) -> dict:
    """:func:`short_sequence_times` over `ns`: {"n": [...], "core_speedup": [...], "layer_speedup": [...], ...}
    (`progress`: a tqdm bar; `times`: the function to call, the dashboard's memoised one)."""
    if progress:
        from tqdm.auto import tqdm
        ns = tqdm(ns, desc="N sweep", leave=False)
    rows = [times(n, d, heads, device) for n in ns]
    return {"n": [r["n"] for r in rows], **{k: [r[k] for r in rows] for k in (
        "core_speedup", "layer_speedup", "naive_s", "flash_s", "other_s", "attention_share_naive")}}


class SpeedupVsNPlot(LivePlot):
    """Predicted speedup of flash2 over naive against N: the attention core, and the whole layer (Amdahl); the
    current N is marked. Every change is drawn in place and blitted: a new N moves the markers; another sweep (d,
    heads, device) moves the lines and the y axis (animated: its ticks are drawn with every frame) (chapter 11)."""

    figsize = (6.8, 3.4)

    def draw(self, fig, sweep: dict, current: dict | None = None, title: str = ""):
        ax = self._ax = fig.add_subplot()
        (self._core_line,) = ax.plot(sweep["n"], sweep["core_speedup"], "--o", color="#7f7f7f",
                                     label="attention core")
        (self._layer_line,) = ax.plot(sweep["n"], sweep["layer_speedup"], "-o", color="#1f77b4",
                                      label="whole layer (+ projections, MLP)")
        (self._core,) = ax.plot([], [], "o", color="#d62728", ms=9)
        (self._layer,) = ax.plot([], [], "o", color="#d62728", ms=9, label="current N")
        self._one = ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequence length N")
        ax.set_ylabel("naive time / flash time")
        self._title = ax.set_title("", fontsize=8)
        ax.legend(fontsize=8)
        self.animate(self._one, self._core_line, self._layer_line, self._core, self._layer, ax.yaxis, self._title)
        self._lines(sweep)
        self._mark(current, title)

    def _lines(self, sweep) -> None:
        self._core_line.set_data(sweep["n"], sweep["core_speedup"])
        self._layer_line.set_data(sweep["n"], sweep["layer_speedup"])
        top = max(max(sweep["core_speedup"]), max(sweep["layer_speedup"]), 1.0)
        self._ax.set_ylim(0, 1.06 * top)

    def _mark(self, current, title) -> None:
        on = current is not None
        self._core.set_data([current["n"]] if on else [], [current["core_speedup"]] if on else [])
        self._layer.set_data([current["n"]] if on else [], [current["layer_speedup"]] if on else [])
        self._title.set_text("\n".join(textwrap.wrap(title, 100)))

    def refresh(self, sweep, current=None, title=""):
        if list(sweep["n"]) != list(self.args["sweep"]["n"]):
            return False
        if sweep is not self.args["sweep"]:
            self._lines(sweep)
        self._mark(current, title)
        return True


def plot_speedup_vs_n(sweep: dict, current: dict | None = None, title: str = ""):
    """Predicted speedup of flash2 over naive against N: the attention core, and the whole layer (Amdahl)."""
    return SpeedupVsNPlot(sweep=sweep, current=current, title=title).fig


class MismatchRowsPlot(LivePlot):
    """Max |flash − reference| per query row (log scale), with a plain implementation's rounding (chapter 11)."""

    figsize = (6.8, 3.2)

    def draw(self, fig, result: dict):
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


def plot_mismatch_rows(result: dict):
    """Max |flash − reference| per query row (log scale), with the plain-implementation rounding level."""
    return MismatchRowsPlot(result=result).fig


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


class RescaleDriftPlot(LivePlot):
    """Error of one row's online attention against the keys seen so far (one point per block), with and without
    the rescale (chapter 11). The axes are fixed (keys 0…N; errors 1e-17, where float64 agrees exactly, to 10, a
    wrong answer of the size of V), so a new trend or block size moves the lines, the markers and the title in
    place, blitted."""

    figsize = (6.8, 3.3)
    ERR_LIM = (1e-17, 10.0)

    def draw(self, fig, drift: dict):
        ax = self._ax = fig.add_subplot()
        (self._ok,) = ax.semilogy([], [], "o-", color="#1f77b4", ms=3, label="with rescale")
        (self._bug,) = ax.semilogy([], [], "o-", color="#d62728", ms=3, label="rescale=False (the bug)")
        (self._grows,) = ax.semilogy([], [], "v", color="k", ms=6, label="block raised the running max")
        ax.set_xlim(0, drift["n"] * 1.02)
        ax.set_ylim(*self.ERR_LIM)
        ax.set_xlabel("keys seen (after each block)")
        ax.set_ylabel("max |o − exact|")
        self._title = ax.set_title("", fontsize=9)
        ax.legend(fontsize=8, loc="upper left")
        self.animate(self._ok, self._bug, self._grows, self._title)
        self._show(drift)

    def _show(self, drift: dict) -> None:
        lo, hi = self.ERR_LIM
        seen = np.minimum((np.asarray(drift["blocks"]) + 1) * drift["block"], drift["n"])
        ok = np.clip(np.asarray(drift["err_ok"]), lo, hi)
        bug = np.clip(np.asarray(drift["err_bug"]), lo, hi)
        grows = np.asarray(drift["max_grows"], dtype=bool)
        self._ok.set_data(seen, ok)
        self._bug.set_data(seen, bug)
        self._grows.set_data(seen[grows], bug[grows])
        self._title.set_text(f"one row, N={drift['n']}, block={drift['block']}, score trend={drift['trend']:g}")

    def refresh(self, drift: dict) -> bool:
        if drift["n"] != self.args["drift"]["n"]:
            return False
        self._show(drift)
        return True


def plot_rescale_drift(drift: dict):
    """Error of one row's online attention after each block, with and without the rescale; blocks that raise the
    running max are marked."""
    return RescaleDriftPlot(drift=drift).fig


def figure_short_sequence_speedup():
    """figures/ch11_short_sequence_speedup.png"""
    return plot_speedup_vs_n(speedup_sweep(SHORT_NS), current=short_sequence_times(512),
                             title="H200, d=64, 16 heads, batch 1: the win shrinks at short N")
