"""Chapter 02 figures: Algorithm 0 step by step, HBM traffic vs N, and the eager framework's bytes per op."""
from __future__ import annotations

import numpy as np

from flashsim.course.ch02.traffic import TRAFFIC_NS, eager_op_bytes, traffic_sweep
from flashsim.course.kit.plotting import LivePlot

__all__ = ["TileStepPlot", "TrafficVsNPlot", "EagerOpsPlot", "plot_algorithm0_step", "plot_traffic_vs_n", "plot_eager_ops", "figure_traffic_vs_n",
           "figure_eager_ops"]

_KIND_COLOR = {"load": 3, "compute": 4, "store": 5}
_GRID_COLORS = ["#f4f4f4", "#aec7e8", "#fde0bd", "#ff7f0e", "#2ca02c", "#d62728"]


def _tile_grid(state: dict, name: str, t: int, square: bool) -> np.ndarray:
    """(t, t) for an N×N tensor, (t, 1) for an N×d one: 0 untouched, 1 written, 2 read, 3-5 this step's kind."""
    grid = np.zeros((t, t if square else 1))
    ndim = 2 if square else 1
    for tensor, tile in state.get("read", ()):
        if tensor == name and len(tile) == ndim and tile[0] < t:
            grid[tile[0], tile[1] if square else 0] = 2
    for tensor, tile in state["written"]:
        if tensor == name and len(tile) == ndim and tile[0] < t:
            grid[tile[0], tile[1] if square else 0] = 1
    ev = state["event"]
    if ev.tensor == name and ev.tile:
        grid[ev.tile[0], ev.tile[1] if square else 0] = _KIND_COLOR[ev.kind]
    return grid


class TileStepPlot(LivePlot):
    """One step of a tiled loop (state from :class:`flashsim.widgets.EventStepper`, e.g. Algorithm 0): the tile
    grid of each tensor in HBM, drawn to scale (an N×d tensor is d wide, an N×N one N wide), by row block for
    the N×d ones and by Br × Bc tile for those in ``state["square"]``; tiles written so far shaded, the tile of
    this step coloured by what happens to it (orange load, green compute, red store); below, the HBM bytes read
    and written per tensor so far. A new step of the same run recolours the grids and resizes the bars in place
    (chapter 02; chapter 03's tiled QKᵀ uses it too)."""

    figsize = (8.4, 4.6)
    tight = False    # fixed margins: tight_layout cannot place the equal-aspect grids

    def draw(self, fig, state):
        from matplotlib.collections import LineCollection
        from matplotlib.colors import ListedColormap
        n, d, b = state["n"], state["d"], state["block"]
        t = -(-n // b)
        cmap = ListedColormap(_GRID_COLORS)
        tensors = tuple(state.get("tensors") or ("Q", "K", "V", "S", "P", "O"))
        squares = tuple(state.get("square") or ("S", "P"))
        widths = [n if name in squares else d for name in tensors]
        gs = fig.add_gridspec(2, len(tensors), height_ratios=[1.25, 1.0], width_ratios=widths, hspace=0.45,
                              wspace=0.35, left=0.08, right=0.8, top=0.92, bottom=0.08)
        self._grids, self._t = {}, t
        for k, name in enumerate(tensors):
            ax = fig.add_subplot(gs[0, k])
            square = name in squares
            width = n if square else d
            im = ax.imshow(_tile_grid(state, name, t, square), cmap=cmap, vmin=0, vmax=5, aspect="equal",
                           extent=(0, width, n, 0), interpolation="nearest")
            self._grids[name] = (im, square)
            self.animate(im)
            ax.set_xticks([])
            ax.set_yticks([(i + 0.5) * b for i in range(t)], [str(i) for i in range(t)])
            ax.tick_params(labelsize=6, length=0)
            ax.set_title(f"{name} ({'N×N' if square else 'N×d'})", fontsize=9)
            # the tile borders go over the (animated) grid, so they are animated too: one collection per grid (one
            # artist to draw per frame, not one per line)
            xs = np.arange(0, width + 1, b) if square else np.array([0, width])
            ys = np.arange(0, n + 1, b)
            borders = [[(x, 0), (x, n)] for x in xs] + [[(0, y), (width, y)] for y in ys]
            self.animate(ax.add_collection(LineCollection(borders, colors="w", linewidths=1), autolim=False))
        ax = self._bars_ax = fig.add_subplot(gs[1, :])
        xs = np.arange(len(tensors))
        self._names = list(tensors)
        self._read = ax.bar(xs - 0.2, np.zeros(len(tensors)), 0.4, label="read from HBM", color="#1f77b4")
        self._write = ax.bar(xs + 0.2, np.zeros(len(tensors)), 0.4, label="written to HBM", color="#d62728")
        ax.set_xticks(xs, self._names)
        ax.set_ylabel("bytes so far")
        # outside the axes, to the right: the bars grow under where a legend inside would sit
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        self._title = ax.set_title("", fontsize=9)
        # the whole run's largest count: the axis does not rescale while the stepper plays
        ax.set_ylim(0, max(state.get("bytes_max", 0), 1) * 1.08)
        self.animate(*self._read, *self._write, self._title)
        self._show(state)

    def _show(self, state) -> None:
        for name, (im, square) in self._grids.items():
            im.set_data(_tile_grid(state, name, self._t, square))
        r = [state["read_by_tensor"].get(x, 0) for x in self._names]
        w = [state["write_by_tensor"].get(x, 0) for x in self._names]
        for rect, v in zip(self._read, r):
            rect.set_height(v)
        for rect, v in zip(self._write, w):
            rect.set_height(v)
        if max(r + w + [0]) > state.get("bytes_max", 0):
            self._bars_ax.set_ylim(0, max(r + w) * 1.08)
        ev = state["event"]
        phase = f"{state['phase']} — " if state.get("phase") else ""
        self._title.set_text(f"step {state['step'] + 1}/{state['n_steps']}: {phase}{ev.kind} {ev.tensor}"
                             f"{list(ev.tile)} ({ev.nbytes} B)")

    def refresh(self, state) -> bool:
        old = self.args["state"]
        if any(old.get(k) != state.get(k) for k in ("n", "d", "block", "tensors", "square")):
            return False
        self._show(state)
        return True


def plot_algorithm0_step(state: dict):
    """One step of a tiled loop as a Figure (:class:`TileStepPlot`; chapter 02)."""
    return TileStepPlot(state=state).fig


class TrafficVsNPlot(LivePlot):
    """HBM bytes vs N (log-log), one line per algorithm (`sweep`: {label: [bytes at each n]}), with N² and N slopes
    for reference and the marked N (chapter 02). Moving N moves the marker; a new d or dtype moves the lines."""

    figsize = (6.8, 4.0)
    _STYLES = {"naive": ("#1f77b4", "Algorithm 0 (standard)"), "eager(pytorch)": ("#ff7f0e", "eager, op by op"),
               "flash2": ("#2ca02c", "FlashAttention (FA2, ch. 05)")}

    def draw(self, fig, ns, sweep, mark_n=None, title=""):
        ns = np.asarray(ns, dtype=np.float64)
        ax = self._ax = fig.add_subplot()
        self._lines = {}
        for key, ys in sweep.items():
            color, label = self._STYLES.get(key, (None, key))
            (self._lines[key],) = ax.loglog(ns, np.asarray(ys, dtype=np.float64), "o-", ms=3, color=color,
                                            label=label)
        (self._n2,) = ax.loglog(ns, ns, ":", color="grey", lw=1, label="∝ N²")
        (self._n1,) = ax.loglog(ns, ns, "--", color="grey", lw=1, label="∝ N")
        self._mark = ax.axvline(mark_n if mark_n is not None else ns[0], color="k", ls=":", lw=1,
                                visible=mark_n is not None)
        ax.set_xlabel("sequence length N")
        ax.set_ylabel("HBM bytes (read + written), forward")
        self._title = ax.set_title("", fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=8)
        self.animate(*self._lines.values(), self._n2, self._n1, self._mark, self._title)
        self._show(ns, sweep, mark_n, title)

    def _show(self, ns, sweep, mark_n, title):
        ns = np.asarray(ns, dtype=np.float64)
        for key, ys in sweep.items():
            self._lines[key].set_ydata(np.asarray(ys, dtype=np.float64))
        ref = np.asarray(next(iter(sweep.values())), dtype=np.float64)
        self._n2.set_ydata(ref[-1] * (ns / ns[-1]) ** 2)
        self._n1.set_ydata(ref[0] * (ns / ns[0]))
        if mark_n is not None:
            self._mark.set_xdata([mark_n, mark_n])
        self._title.set_text("HBM traffic vs N" + (f" — {title}" if title else ""))
        self._ax.relim()
        self._ax.autoscale_view()

    def refresh(self, ns, sweep, mark_n=None, title=""):
        if list(ns) != list(self.args["ns"]) or list(sweep) != list(self.args["sweep"]) or (
                (mark_n is None) != (self.args.get("mark_n") is None)):
            return False
        self._show(ns, sweep, mark_n, title)
        return True


def plot_traffic_vs_n(ns, sweep: dict, mark_n: int | None = None, title: str = ""):
    """:class:`TrafficVsNPlot` as a Figure (chapter 02)."""
    return TrafficVsNPlot(ns=list(ns), sweep=sweep, mark_n=mark_n, title=title).fig


class EagerOpsPlot(LivePlot):
    """Stacked bars, one per forward kernel: HBM MiB read and written (`rows` from
    :func:`flashsim.widgets.eager_op_bytes`). The same kernels with other bytes change in place (chapter 02)."""

    figsize = (7.2, 3.6)

    def draw(self, fig, rows, title=""):
        ax = self._ax = fig.add_subplot()
        xs = np.arange(len(rows))
        zeros = np.zeros(len(rows))
        self._reads = ax.bar(xs, zeros, color="#1f77b4", label="read")
        self._writes = ax.bar(xs, zeros, color="#d62728", label="written")
        self._totals = [ax.text(x, 0, "", ha="center", va="bottom", fontsize=8) for x in xs]
        ax.set_xticks(xs, [r[0] for r in rows], rotation=20, ha="right", fontsize=8)
        ax.set_ylabel("MiB per head")
        self._title = ax.set_title("", fontsize=9)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        self.animate(*self._reads, *self._writes, *self._totals, self._title)
        self._show(rows, title)

    def _show(self, rows, title):
        reads = np.array([r[1] for r in rows], dtype=np.float64) / 2**20
        writes = np.array([r[2] for r in rows], dtype=np.float64) / 2**20
        for rr, rw, txt, r, w in zip(self._reads, self._writes, self._totals, reads, writes):
            rr.set_height(r)
            rw.set_y(r)
            rw.set_height(w)
            txt.set_y(r + w)
            txt.set_text(f"{r + w:.1f}")
        self._ax.set_ylim(0, max(float((reads + writes).max(initial=0)), 1e-9) * 1.12)
        self._title.set_text((title + "\n" if title else "") + f"total {float((reads + writes).sum()):.1f} MiB")

    def refresh(self, rows, title=""):
        if [r[0] for r in rows] != [r[0] for r in self.args["rows"]]:
            return False
        self._show(rows, title)
        return True


def plot_eager_ops(rows, title: str = ""):
    """:class:`EagerOpsPlot` as a Figure (chapter 02)."""
    return EagerOpsPlot(rows=list(rows), title=title).fig


def figure_traffic_vs_n():
    """figures/traffic_vs_n.png"""
    return plot_traffic_vs_n(TRAFFIC_NS, traffic_sweep(TRAFFIC_NS, 64, "fp16", "h200"), mark_n=8192,
                             title="d = 64, fp16, one head")


def figure_eager_ops():
    """figures/eager_ops.png"""
    rows = eager_op_bytes(1024, 64, "fp16", "eager", "pytorch", causal=True, dropout_p=0.1)
    return plot_eager_ops(rows, title="PyTorch eager, op by op, N = 1024, d = 64, fp16, causal, dropout")
