"""Chapter 10 figures: the CPU view. Every function returns a matplotlib Figure (Agg-safe: no pyplot)."""
from __future__ import annotations

import textwrap

import numpy as np

from flashsim.course.kit.plotting import LivePlot, new_figure
from flashsim.model.hardware import get_device

__all__ = ["plot_hierarchy_cpu_gpu", "plot_cpu_time_memory", "plot_block_vs_cache"]


def plot_hierarchy_cpu_gpu(caches: dict, gpu: str = "h200"):
    """Sizes of the fast tiers, log scale: the CPU's L1d / L2 / L3 next to a GPU's SRAM per SM and L2."""
    hw = get_device(gpu)
    fig = new_figure((7.0, 3.0))
    ax = fig.add_subplot()
    labels = ["L1d", "L2 (per core)\n= 'SRAM'", "L3 (shared)\n= 'L2'"]
    cpu = [caches.get("L1d") or 0, caches.get("L2") or 0, caches.get("L3") or 0]
    gpu_vals = [0, hw.sram_bytes, hw.l2_bytes]
    x = np.arange(3)
    ax.bar(x - 0.2, cpu, 0.4, label=f"this CPU ({caches.get('cores')} cores)", color="#ff7f0e")
    ax.bar(x + 0.2, gpu_vals, 0.4, label=f"{hw.name}: SRAM per SM, L2", color="#1f77b4")
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("bytes")
    ax.legend(fontsize=8)
    ax.set_title("the fast tiers: a CPU core's L2 plays the SM's shared memory", fontsize=9)
    fig.tight_layout()
    return fig


def plot_cpu_time_memory(m: dict):
    """Measured time and peak memory of flash (numba) and naive (numpy) against N, with the predicted memory."""
    from matplotlib.ticker import NullLocator
    fig = new_figure((8.6, 3.4))
    ax1, ax2 = fig.subplots(1, 2)
    n = np.asarray(m["n"], float)
    ax1.loglog(n, m["naive_s"], "o-", color="#7f7f7f", label="naive numpy")
    ax1.loglog(n, m["flash_s"], "o-", color="#1f77b4", label="flash (numba, blocked)")
    ax1.set_xlabel("N")
    ax1.set_ylabel(m.get("time_label", "best time of 5 (s)"))
    ax1.set_title(f"time, d={m['d']}, float32", fontsize=9)
    ax1.legend(fontsize=8)
    ax2.loglog(n, m["naive_peak"], "o-", color="#7f7f7f", label="naive, measured")
    ax2.loglog(n, m["naive_predicted"], ":", color="#7f7f7f", label="naive, N²·4 + output")
    ax2.loglog(n, m["flash_peak"], "o-", color="#1f77b4", label="flash, measured")
    ax2.loglog(n, m["flash_predicted"], ":", color="#1f77b4", label="flash, O(N d) predicted")
    ax2.set_xlabel("N")
    for ax in (ax1, ax2):  # tick at the measured N, not at 2×10³, 3×10³, … (they overlap)
        ax.set_xticks(list(n), [f"{int(x)}" for x in n], fontsize=8)
        ax.xaxis.set_minor_locator(NullLocator())
    ax2.set_ylabel("peak extra bytes")
    ax2.set_title("memory (tracemalloc)", fontsize=9)
    ax2.legend(fontsize=7)
    fig.tight_layout()
    return fig


class BlockCachePlot(LivePlot):
    """Measured time against block_c, and the step's working set against the cache sizes (twin axis); the current
    block pair is marked. A new block_c moves the marker; a new block_r (another sweep over the same block_c values)
    changes the two curves and the time axis in place, drawn over the rest: the working-set axis spans every
    block_r's (the sweep's "working_set_range"), so it stays (chapter 10)."""

    figsize = (7.2, 3.6)

    def draw(self, fig, sweep: dict, caches: dict, current: dict | None = None, title: str = ""):
        from matplotlib.ticker import MaxNLocator
        ax = fig.add_subplot()
        bc = np.asarray(sweep["block_c"])
        (self._time,) = ax.plot(bc, np.asarray(sweep["time_s"], float) * 1e3, "o-", color="#1f77b4",
                                label=sweep.get("time_label", "time (ms)"))
        (self._marker,) = ax.plot([], [], "o", color="#d62728", ms=10)
        ax.set_xlabel("block_c")
        self._block_r = ax.text(1.0, -0.1, "", transform=ax.transAxes, ha="right", va="top", fontsize=9)
        # the time axis moves with block_r, so it is animated (drawn with every frame): few ticks, and its label a
        # text of its own in the background
        ax.yaxis.set_major_locator(MaxNLocator(nbins=5))
        ylabel = "best time (ms)" if "best" in sweep.get("time_label", "best") else "time (ms)"
        ax.text(-0.1, 0.5, ylabel, color="#1f77b4", rotation=90, transform=ax.transAxes, ha="center", va="center")
        ax2 = ax.twinx()
        (self._ws,) = ax2.plot(bc, np.asarray(sweep["working_set"]) / 1024, "s--", color="#ff7f0e", ms=3,
                               label="working set")
        levels = []
        for name, color in (("L1d", "#2ca02c"), ("L2", "#9467bd")):
            if caches.get(name):
                levels.append(caches[name] / 1024)
                ax2.axhline(caches[name] / 1024, color=color, ls=":", lw=1.2)
                ax2.text(bc[0], caches[name] / 1024, f" {name}", color=color, va="bottom", fontsize=8)
        if caches.get("L2"):
            levels.append(caches["L2"] / 2048)
            ax2.axhline(caches["L2"] / 2048, color="#9467bd", ls="-.", lw=0.8)
            ax2.text(bc[-1], caches["L2"] / 2048, "½ L2 ", color="#9467bd", va="bottom", ha="right", fontsize=8)
        ax2.set_yscale("log")
        lo, hi = sweep.get("working_set_range") or (min(sweep["working_set"]), max(sweep["working_set"]))
        lo, hi = min([lo / 1024, *levels]), max([hi / 1024, *levels])
        ax2.set_ylim(lo / 1.3, hi * 1.3)
        ax2.set_ylabel("one step's working set (KiB)", color="#ff7f0e")
        self._title = ax.set_title("", fontsize=8)
        self._ax = ax
        self.animate(self._time, ax.yaxis, self._marker, self._ws, self._block_r, self._title)
        self._mark(sweep, current, title)

    def _mark(self, sweep, current, title) -> None:
        on = current is not None and current["block_r"] == sweep["block_r"] and current["time_s"] is not None
        self._marker.set_data([current["block_c"]] if on else [], [current["time_s"] * 1e3] if on else [])
        self._block_r.set_text(f"(block_r = {sweep['block_r']})")
        # always two lines (a blank one above a short title): the layout, computed at the first drawing, then
        # fits every title, however long this machine's cache names and times make it
        lines = textwrap.wrap(title, 100)
        self._title.set_text("\n".join([""] * (2 - len(lines)) + lines))

    @staticmethod
    def _frame(sweep, caches) -> tuple:
        """What the background shows: another of these redraws the figure."""
        return (tuple(sweep["block_c"]), sweep.get("time_label"), tuple(sweep.get("working_set_range") or ()),
                caches)

    def refresh(self, sweep, caches, current=None, title=""):
        if self._frame(sweep, caches) != self._frame(self.args["sweep"], self.args["caches"]):
            return False
        if sweep is not self.args["sweep"]:
            times_ms = np.asarray(sweep["time_s"], float) * 1e3
            self._time.set_ydata(times_ms)
            self._ws.set_ydata(np.asarray(sweep["working_set"]) / 1024)
            self._ax.relim()
            self._ax.autoscale_view()
        self._mark(sweep, current, title)
        return True


def plot_block_vs_cache(sweep: dict, caches: dict, current: dict | None = None, title: str = ""):
    """Measured time against block_c, and the step's working set against the cache sizes (twin axis)."""
    return BlockCachePlot(sweep=sweep, caches=caches, current=current, title=title).fig
