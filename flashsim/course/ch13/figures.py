"""Chapter 13 figures: the ring stepped, compute vs transfer time per ring step (the overlap condition), flash-
decoding's time vs number of splits, and bytes sent per device measured vs simulated. Every function returns a
matplotlib Figure (Agg-safe: no pyplot)."""
from __future__ import annotations

import math

import numpy as np

from flashsim.course.kit.plotting import LivePlot, new_figure
from flashsim.model.multi.cluster import flash_decoding, get_link, overlap_threshold, ring_step_times

__all__ = ["plot_ring_step", "plot_overlap", "plot_decoding_splits", "plot_ring_bytes"]

_FULL, _DIAG, _SKIP, _TODO, _SEND = "#2ca02c", "#bcbd22", "#c7c7c7", "#ffffff", "#d62728"


def _mib(x: float) -> str:
    return f"{x / 2**20:.3g} MiB" if x >= 2**20 else f"{x / 2**10:.3g} KiB"


class RingStepPlot(LivePlot):
    """One step of the ring (state from :class:`flashsim.widgets.RingStepper`): devices on a circle, each with its
    Q shard and the K/V block it holds, red arrows for this step's sends; the (device, block) grid of what has been
    computed; and the bytes each device has sent so far. Another step recolours it in place (drawn over the rest:
    the bars' y limit is the whole pass's); a mask with other link bytes redraws it (chapter 13)."""

    figsize = (11, 3.9)
    tight = False                                   # the three panels are placed by hand

    def draw(self, fig, state: dict):
        from matplotlib.patches import FancyArrowPatch
        P = state["world"]
        ax, grid_ax, bar_ax = (fig.add_axes([0.0, 0.02, 0.36, 0.82]), fig.add_axes([0.42, 0.14, 0.24, 0.66]),
                               fig.add_axes([0.74, 0.14, 0.24, 0.66]))
        ang = [math.pi / 2 - 2 * math.pi * r / P for r in range(P)]
        xy = [(math.cos(a), math.sin(a)) for a in ang]
        self._arrows = [ax.add_patch(FancyArrowPatch(xy[r], xy[(r + 1) % P], connectionstyle="arc3,rad=-0.25",
                                                     arrowstyle="-|>", mutation_scale=14, shrinkA=26, shrinkB=26))
                        for r in range(P)] if P > 1 else []
        self._boxes = [ax.text(xy[r][0], xy[r][1], "", ha="center", va="center", fontsize=8,
                               bbox=dict(boxstyle="round", fc="white", ec="black", alpha=0.9)) for r in range(P)]
        ax.set_xlim(-1.6, 1.6)
        ax.set_ylim(-1.5, 1.5)
        ax.set_aspect("equal")
        ax.axis("off")
        self._title = ax.set_title("", fontsize=9, loc="left")
        self._grid = grid_ax.imshow(np.ones((P, P, 3)), interpolation="nearest")
        grid_ax.set_xticks(range(P))
        grid_ax.set_yticks(range(P))
        grid_ax.set_xlabel("K/V block j")
        grid_ax.set_ylabel("device r (keeps Q_r)")
        grid_ax.set_title("blocks seen (green: computed,\nolive: diagonal, grey: masked)", fontsize=8)
        self._total = bar_ax.bar(range(P), state["final_link_bytes"], color="#eeeeee", edgecolor="#999999",
                                 label="whole pass")
        self._sent = bar_ax.bar(range(P), [0] * P, color=_SEND, label="so far")
        bar_ax.set_xticks(range(P))
        bar_ax.set_xlabel("device r (sends to r+1)")
        bar_ax.set_ylabel("bytes sent")
        self._bar_title = bar_ax.set_title("", fontsize=8, pad=14)   # above the axis' offset (×1e6)
        bar_ax.legend(fontsize=7, loc="upper left")
        self._bar_ax = bar_ax
        # the y limit covers the whole pass (the same at every step, room above for the legend), so a step only
        # redraws what it changes: the whole pass's bars stay in the background
        self._bar_ax.set_ylim(0, 1.4 * max(max(state["final_link_bytes"], default=0), 1.0))
        self.animate(*self._arrows, *self._boxes, self._title, self._grid, *self._sent, self._bar_title)
        self._show(state)

    def _show(self, state: dict) -> None:
        P, step = state["world"], state["step"]
        for r, arrow in enumerate(self._arrows):
            sending = step["sends"][r]
            arrow.set_color(_SEND if sending else "#bbbbbb")
            arrow.set_linewidth(2.2 if sending else 1)
        for r, box in enumerate(self._boxes):
            kind = step["work"][r]
            box.set_text(f"GPU {r}\nQ{r} · KV{step['held'][r]}\n{kind}")
            box.get_bbox_patch().set_facecolor({"full": _FULL, "diagonal": _DIAG, "skip": _SKIP}[kind])
        self._title.set_text(state["title"])
        img = np.ones((P, P, 3))
        rgb = {"full": (0.17, 0.63, 0.17), "diagonal": (0.74, 0.74, 0.13), "skip": (0.78, 0.78, 0.78)}
        for s in state["steps_so_far"]:
            for r in range(P):
                img[r, s["held"][r]] = rgb[s["work"][r]]
        self._grid.set_data(img)
        sent = np.array(step["link_bytes"], float)
        total = np.array(state["final_link_bytes"], float)
        for bar, h in zip(self._sent, sent):
            bar.set_height(h)
        self._bar_title.set_text(f"link bytes: {_mib(sent.sum())} of {_mib(total.sum())}")

    def refresh(self, state: dict) -> bool:
        if (state["world"] != self.args["state"]["world"]
                or list(state["final_link_bytes"]) != list(self.args["state"]["final_link_bytes"])):
            return False                            # another ring (the mask): another y limit
        self._show(state)
        return True


def plot_ring_step(state: dict):
    """One step of the ring (state from :class:`flashsim.widgets.RingStepper`): devices on a circle, each with its
    Q shard and the K/V block it holds, red arrows for this step's sends; the (device, block) grid of what has been
    computed; and the bytes each device has sent so far."""
    return RingStepPlot(state=state).fig


class OverlapPlot(LivePlot):
    """Time of one ring step vs block size n (rows per device): compute 4·H·n²·d/F (one line) against the transfer
    2·H·n·d·b/W of each link (one line each); `current` marks a block, and a new `current` moves the mark
    (chapter 13)."""

    figsize = (7.5, 4.2)

    def draw(self, fig, device="h200", links=("nvlink4", "pcie5", "infiniband_ndr"), d: int = 128, heads: int = 1,
             dtype="fp16", current: int | None = None, blocks=None):
        blocks = np.unique(np.logspace(6, 17, 45, base=2).astype(int)) if blocks is None else np.asarray(blocks)
        ax = fig.add_subplot(1, 1, 1)
        comp = [ring_step_times(n, d, heads, 1, dtype, device, links[0])[0] for n in blocks]
        ax.loglog(blocks, comp, color="black", lw=2.2, label=f"compute on {device} (4·H·n²·d / F)")
        colors = ["#1f77b4", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2"]
        for link, c in zip(links, colors):
            comm = [ring_step_times(n, d, heads, 1, dtype, device, link)[1] for n in blocks]
            n0 = overlap_threshold(device, link, dtype)
            ax.loglog(blocks, comm, color=c, lw=1.6, label=f"{get_link(link).name}: hides for n ≥ {n0:,.0f}")
            t0 = ring_step_times(n0, d, heads, 1, dtype, device, link)[1]
            ax.plot([n0], [t0], "o", color=c)
        self._current = self.animate(ax.axvline(current or blocks[0], color=_SEND, ls="--", lw=1,
                                                visible=bool(current)))
        ax.set_xlabel("block n = rows of Q/K/V per device")
        ax.set_ylabel("seconds per ring step")
        ax.set_title(f"overlap condition: n ≥ b·F/(2·W) (d={d}, {heads} head(s), {dtype})", fontsize=10)
        ax.legend(fontsize=7.5, loc="upper left")
        ax.grid(True, which="both", alpha=0.25)

    def refresh(self, current: int | None = None, **args) -> bool:
        if args != {k: v for k, v in self.args.items() if k != "current"}:
            return False
        if current:
            self._current.set_xdata([current, current])
        self._current.set_visible(bool(current))
        return True


def plot_overlap(device="h200", links=("nvlink4", "pcie5", "infiniband_ndr"), d: int = 128, heads: int = 1,
                 dtype="fp16", current: int | None = None, blocks=None):
    """Time of one ring step vs block size n (rows per device): compute 4·H·n²·d/F (one line) against the
    transfer 2·H·n·d·b/W of each link (one line each). Where they cross, n = b·F/(2W), the transfer can hide."""
    return OverlapPlot(device=device, links=tuple(links), d=d, heads=heads, dtype=dtype, current=current,
                       blocks=blocks).fig


class DecodingPlot(LivePlot):
    """Flash-decoding's modelled time vs number of splits (batch 1, one query row), with H200 measurements
    ({splits: seconds}) where given; `current` marks a split count. A new `current` moves the mark (chapter 13)."""

    figsize = (7.5, 4.0)

    def draw(self, fig, n: int = 65536, d: int = 128, heads: int = 16, splits=(1, 2, 4, 8, 16, 32, 64, 128),
             device="h200", measured: dict | None = None, current: int | None = None):
        ax = fig.add_subplot(1, 1, 1)
        res = [flash_decoding(n, d, heads, splits=s, device=device) for s in splits]
        ax.loglog(splits, [r.time_s * 1e6 for r in res], "o-", color="#1f77b4", label="simulator (SM-share model)")
        if measured:
            ks = sorted(measured)
            ax.loglog(ks, [measured[k] * 1e6 for k in ks], "s--", color="#d62728", label="measured on the H200")
        self._current = self.animate(ax.axvline(current or splits[0], color="#555555", ls=":", lw=1,
                                                visible=bool(current)))
        num_sms = res[0].device.num_sms
        ax.axvline(max(1, num_sms / heads), color="#2ca02c", lw=1, ls="--", label=f"splits·H = {num_sms} SMs")
        ax.set_xlabel("num_splits (K/V chunks per head)")
        ax.set_ylabel("µs")
        ax.set_title(f"flash-decoding: batch 1, N={n:,}, d={d}, H={heads}, fp16 on {res[0].device.name}", fontsize=10)
        ax.legend(fontsize=8)
        ax.grid(True, which="both", alpha=0.25)

    refresh = OverlapPlot.refresh


def plot_decoding_splits(n: int = 65536, d: int = 128, heads: int = 16, splits=(1, 2, 4, 8, 16, 32, 64, 128),
                         device="h200", measured: dict | None = None, current: int | None = None):
    """Flash-decoding's modelled time vs number of splits (batch 1, one query row), with H200 measurements
    ({splits: seconds}) where given."""
    return DecodingPlot(n=n, d=d, heads=heads, splits=tuple(splits), device=device, measured=measured,
                        current=current).fig


def plot_ring_bytes(sent: list, simulated: list, title: str = "bytes sent per device"):
    """Bars: bytes each device sent, measured (torch.distributed) next to the simulator's link bytes."""
    fig = new_figure((6, 3.4))
    ax = fig.add_subplot(1, 1, 1)
    x = np.arange(len(sent))
    ax.bar(x - 0.2, simulated, 0.4, label="simulated link bytes", color="#1f77b4")
    ax.bar(x + 0.2, sent, 0.4, label="measured (sent by torch.distributed)", color="#d62728")
    ax.set_xticks(x)
    ax.set_xticklabels([f"rank {r} → {(r + 1) % len(sent)}" for r in x])
    ax.set_ylabel("bytes")
    ax.set_title(title, fontsize=10)
    ax.set_ylim(0, 1.3 * max(max(sent, default=0), max(simulated, default=0), 1))  # room for the legend
    ax.legend(fontsize=8, loc="upper center", ncol=2)
    fig.tight_layout()
    return fig
