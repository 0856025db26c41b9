"""Chapter 12 figures: the learner's kernel, its measured IO against the simulator's, its speed against SDPA (the H200
tuning sweeps are chapter 14's).

Every function returns a matplotlib Figure (Agg-safe: no pyplot).
"""
from __future__ import annotations

from flashsim.course.kit.plotting import LivePlot, new_figure

__all__ = ["plot_kernel_io_by_tensor", "plot_speed_vs_sdpa"]


class KernelIOPlot(LivePlot):
    """Bars per tensor (Q, K, V loaded; O, LSE stored): simulated KiB, and measured KiB where given (chapter 12).
    New byte counts change the bar heights and the y axis in place (drawn over the rest); another set of tensors
    redraws."""

    figsize = (6.4, 3.2)
    tight = False               # fixed margins: the legend above the axes, the title under it

    def draw(self, fig, simulated: dict, measured: dict | None = None, title: str = ""):
        from matplotlib.ticker import MaxNLocator
        fig.subplots_adjust(left=0.1, right=0.98, bottom=0.17, top=0.8)
        ax = fig.add_subplot()
        self._names = [("load", t) for t in sorted(simulated["loads"])] + [("store", t)
                                                                          for t in sorted(simulated["stores"])]
        xs = list(range(len(self._names)))
        w = 0.38 if measured else 0.6
        self._sim = ax.bar([x - (w / 2 if measured else 0) for x in xs], self._kib(simulated), w,
                           label="simulated (kernel_io)", color="#1f77b4")
        self._meas = (ax.bar([x + w / 2 for x in xs], self._kib(measured), w, label="measured (count_io)",
                             color="#d62728") if measured else None)
        ax.set_xticks(xs, [f"{t}\n{k}" for k, t in self._names])
        # the bars, the title and the y axis change with the block sizes, so they are animated (drawn with every
        # frame, over the rest): few ticks, and the axis label a text of its own in the background
        ax.yaxis.set_major_locator(MaxNLocator(nbins=4))
        ax.text(-0.08, 0.5, "KiB", rotation=90, transform=ax.transAxes, ha="center", va="center")
        self._title = ax.set_title(title, fontsize=9)
        ax.legend(fontsize=8, loc="lower left", bbox_to_anchor=(0, 1.08), ncol=2, frameon=False)
        self._ax = ax
        self.animate(*self._sim, *(self._meas or ()), self._title, ax.yaxis)
        self._limit(simulated, measured)

    def _kib(self, io: dict) -> list:
        return [io["loads" if k == "load" else "stores"].get(t, 0) / 1024 for k, t in self._names]

    def _limit(self, simulated, measured) -> None:
        self._ax.set_ylim(0, 1.1 * max(self._kib(simulated) + (self._kib(measured) if measured else []) + [1e-3]))

    def refresh(self, simulated, measured=None, title=""):
        names = [("load", t) for t in sorted(simulated["loads"])] + [("store", t) for t in sorted(simulated["stores"])]
        if names != self._names or (measured is None) != (self._meas is None):
            return False
        for bars, io in ((self._sim, simulated), (self._meas, measured)):
            if bars is not None:
                for bar, h in zip(bars, self._kib(io)):
                    bar.set_height(h)
        self._limit(simulated, measured)
        self._title.set_text(title)
        return True


def plot_kernel_io_by_tensor(simulated: dict, measured: dict | None = None, title: str = ""):
    """Bars per tensor (Q, K, V loaded; O, LSE stored): simulated bytes, and measured bytes where given.

    simulated / measured: {"loads": {tensor: bytes}, "stores": {tensor: bytes}} (one launch).
    """
    return KernelIOPlot(simulated=simulated, measured=measured, title=title).fig


def plot_speed_vs_sdpa(speed: dict | None):
    """Median ms and TFLOP/s of the learner's kernel, flashsim.kernels.flash_forward and torch SDPA (its fastest
    backend, named), from a GPU run of :func:`flashsim.exercises.sdpa_speed`; without the learner's kernel
    (``learner_ms`` None: it has not passed yet) the course's kernel and SDPA only; a recorded run (``recorded``:
    "measured on <GPU>, <date>") says so in its title; without a GPU (speed None) a panel that says so."""
    fig = new_figure((6.4, 3.0))
    if not speed:
        ax = fig.add_subplot()
        ax.axis("off")
        ax.text(0.5, 0.5, "no CUDA GPU: speed against SDPA is measured on a GPU only\n"
                "(the interpreter's wall time says nothing about a GPU)", ha="center", va="center", fontsize=10)
        return fig
    backend = str(speed.get("sdpa_backend") or "").split(" (")[0]
    bars = [("yours", "learner_ms", "learner", "#d62728"),                 # (label, ms key, TFLOP/s key, colour)
            ("flashsim\nflash_forward", "flashsim_ms", "flashsim", "#1f77b4"),
            ("torch SDPA" + (f"\n{backend}" if backend else ""), "sdpa_ms", "sdpa", "#7f7f7f")]
    bars = [b for b in bars if speed.get(b[1]) is not None]
    labels, colors = [b[0] for b in bars], [b[3] for b in bars]
    ax1, ax2 = fig.subplots(1, 2)
    ax1.bar(labels, [speed[b[1]] for b in bars], color=colors)
    ax1.set_ylabel("median ms (do_bench)")
    ax2.bar(labels, [speed["tflops"][b[2]] for b in bars], color=colors)
    ax2.set_ylabel("TFLOP/s (4·B·H·N²·d / t)")
    s = speed["size"]
    fig.suptitle(f"{speed.get('device', 'GPU')}: B={s['batch']}, H={s['heads']}, N={s['n']}, d={s['d']}, "
                 f"{s['dtype']}{', causal' if s['causal'] else ''}"
                 + (f" — recorded, {speed['recorded']}" if speed.get("recorded") else
                    "" if speed.get("learner_ms") is not None else " (your kernel has not passed yet)"), fontsize=9)
    for ax in (ax1, ax2):
        ax.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    return fig
