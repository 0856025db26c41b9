"""Chapter 02 figures: Algorithm 0 step by step, HBM traffic vs N, and the eager framework's bytes per op."""
from __future__ import annotations

import numpy as np

__all__ = ["plot_algorithm0_step", "plot_traffic_vs_n", "plot_eager_ops", "figure_traffic_vs_n",
           "figure_eager_ops"]

_KIND_COLOR = {"load": 3, "compute": 4, "store": 5}


def plot_algorithm0_step(state: dict):
    """One step of a tiled loop, chapter 02 (state from :class:`flashsim.widgets.EventStepper`, e.g. Algorithm 0): the tile
    grid of each tensor in HBM (``state["tensors"]``; N×d ones by row block, the N×N ones in ``state["square"]``
    by Br × Bc tile), tiles written so far shaded, the tile of this
    step coloured by what happens to it (orange load, green compute, red store); below, the HBM bytes read and
    written per tensor so far. Returns a Figure."""
    from matplotlib.colors import ListedColormap
    from matplotlib.figure import Figure

    n, b = state["n"], state["block"]
    t = -(-n // b)
    ev = state["event"]
    cmap = ListedColormap(["#f4f4f4", "#aec7e8", "#fde0bd", "#ff7f0e", "#2ca02c", "#d62728"])
    tensors = tuple(state.get("tensors") or ("Q", "K", "V", "S", "P", "O"))
    squares = tuple(state.get("square") or ("S", "P"))
    fig = Figure(figsize=(8.4, 4.6))
    gs = fig.add_gridspec(2, len(tensors), height_ratios=[1.25, 1.0], hspace=0.55)
    for k, name in enumerate(tensors):
        ax = fig.add_subplot(gs[0, k])
        square = name in squares
        grid = np.zeros((t, t if square else 1))
        for tensor, tile in state.get("read", ()):
            if tensor == name and len(tile) == (2 if square else 1) and tile[0] < t:
                grid[tile[0], tile[1] if square else 0] = 2
        for tensor, tile in state["written"]:
            if tensor == name and len(tile) == (2 if square else 1) and tile[0] < t:
                grid[tile[0], tile[1] if square else 0] = 1
        if ev.tensor == name and ev.tile:
            i = ev.tile[0]
            j = ev.tile[1] if square else 0
            grid[i, j] = _KIND_COLOR[ev.kind]
        ax.imshow(grid, cmap=cmap, vmin=0, vmax=5, aspect="auto" if not square else "equal")
        ax.set_xticks([])
        ax.set_yticks(range(t))
        ax.tick_params(labelsize=6)
        ax.set_title(f"{name} ({'N×N' if square else 'N×d'})", fontsize=9)
        for x in np.arange(-0.5, grid.shape[1], 1):
            ax.axvline(x, color="w", lw=1)
        for y in np.arange(-0.5, t, 1):
            ax.axhline(y, color="w", lw=1)
    ax = fig.add_subplot(gs[1, :])
    names = list(tensors)
    r = [state["read_by_tensor"].get(x, 0) for x in names]
    w = [state["write_by_tensor"].get(x, 0) for x in names]
    xs = np.arange(len(names))
    ax.bar(xs - 0.2, r, 0.4, label="read from HBM", color="#1f77b4")
    ax.bar(xs + 0.2, w, 0.4, label="written to HBM", color="#d62728")
    ax.set_xticks(xs, names)
    ax.set_ylabel("bytes so far")
    ax.legend(fontsize=8, loc="upper left")
    phase = f"{state['phase']} — " if state.get("phase") else ""
    ax.set_title(f"step {state['step'] + 1}/{state['n_steps']}: {phase}{ev.kind} {ev.tensor}"
                 f"{list(ev.tile)} ({ev.nbytes} B)", fontsize=9)
    return fig


def plot_traffic_vs_n(ns, sweep: dict, mark_n: int | None = None, title: str = ""):
    """HBM bytes vs N (log-log), one line per algorithm (`sweep`: {label: [bytes at each n]}), with
    N² and N slopes for reference (chapter 02). Returns a Figure."""
    from matplotlib.figure import Figure

    ns = np.asarray(ns, dtype=np.float64)
    fig = Figure(figsize=(6.8, 4.0))
    ax = fig.add_subplot()
    styles = {"naive": ("#1f77b4", "Algorithm 0 (standard)"), "eager(pytorch)": ("#ff7f0e", "eager, op by op"),
              "flash2": ("#2ca02c", "FlashAttention (FA2, ch. 05)")}
    for key, ys in sweep.items():
        color, label = styles.get(key, (None, key))
        ax.loglog(ns, np.asarray(ys, dtype=np.float64), "o-", ms=3, color=color, label=label)
    ref = np.asarray(next(iter(sweep.values())), dtype=np.float64)
    ax.loglog(ns, ref[-1] * (ns / ns[-1]) ** 2, ":", color="grey", lw=1, label="∝ N²")
    ax.loglog(ns, ref[0] * (ns / ns[0]), "--", color="grey", lw=1, label="∝ N")
    if mark_n is not None:
        ax.axvline(mark_n, color="k", ls=":", lw=1)
    ax.set_xlabel("sequence length N")
    ax.set_ylabel("HBM bytes (read + written), forward")
    ax.set_title("HBM traffic vs N" + (f" — {title}" if title else ""), fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_eager_ops(rows, title: str = ""):
    """Stacked bars, one per forward kernel: HBM bytes read and written (`rows` from
    :func:`flashsim.widgets.eager_op_bytes`). Returns a Figure (chapter 02)."""
    from matplotlib.figure import Figure

    labels = [r[0] for r in rows]
    reads = np.array([r[1] for r in rows], dtype=np.float64) / 2**20
    writes = np.array([r[2] for r in rows], dtype=np.float64) / 2**20
    fig = Figure(figsize=(7.2, 3.6))
    ax = fig.add_subplot()
    xs = np.arange(len(rows))
    ax.bar(xs, reads, color="#1f77b4", label="read")
    ax.bar(xs, writes, bottom=reads, color="#d62728", label="written")
    for x, tot in zip(xs, reads + writes):
        ax.text(x, tot, f"{tot:.1f}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(xs, labels, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("MiB per head")
    ax.set_title((title + "\n" if title else "") + f"total {float((reads + writes).sum()):.1f} MiB", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def figure_traffic_vs_n():
    """figures/traffic_vs_n.png"""
    from flashsim.course.ch02.dashboards import TrafficVsN
    return TrafficVsN(n=8192, d=64).figure()


def figure_eager_ops():
    """figures/eager_ops.png"""
    from flashsim.course.ch02.dashboards import EagerOpsDashboard
    return EagerOpsDashboard(n=1024, causal=True, dropout=True).figure()
