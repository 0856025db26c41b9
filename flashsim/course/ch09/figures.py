"""Chapter 09 figures: why the speedup is real. Every function returns a matplotlib Figure (Agg-safe: no pyplot).

:func:`plot_comparisons_side_by_side` (measured vs simulated IO of several kernels, from
:func:`flashsim.course.kit.real_gpu.compare`) is introduced here and reused by chapter 11.
"""
from __future__ import annotations

import textwrap

import numpy as np

from flashsim.course.kit.plotting import LivePlot, new_figure
from flashsim.model.hardware import get_device
from flashsim.model.paper import fig2_left
from flashsim.model.roofline import peak_flops
from flashsim.model.simulator import traffic

#: SRAM sizes (KiB) of the Θ sweep and the dashboard's slider
SRAM_KIBS = (16, 32, 64, 128, 228, 512, 1024)

__all__ = ["plot_comparisons_side_by_side", "plot_theta_sweep", "plot_roofline_points", "plot_fig2_left",
           "plot_l2_rows", "plot_block_sweep", "figure_fa1_fig2_left", "figure_theta_sweep"]


def theta_sweep(ns=(1024, 4096, 16384), d: int = 64, sram_kibs=SRAM_KIBS, algo: str = "flash1",
                device: str = "h200", dtype: str = "fp16") -> dict:
    """HBM bytes of `algo` forward for every (N, M), and the ratio bytes / (N²d²/M) (flat when Θ holds).

    M is the SRAM size in bytes; the blocks follow the simulator's rule for that M (FA1: B_c = ⌈M/4d⌉,
    B_r = min(B_c, d)). Returns {"ns", "sram_bytes", "bytes": {n: [...]}, "ratio": {n: [...]}, "blocks": {...}}.
    """
    from tqdm.auto import tqdm
    out = {"ns": list(ns), "sram_bytes": [k * 1024 for k in sram_kibs], "bytes": {}, "ratio": {}, "blocks": {},
           "d": d, "algo": algo, "device": device, "naive": {}}
    for n in tqdm(ns, desc=f"{algo} over N and M", leave=False):
        out["bytes"][n], out["ratio"][n], out["blocks"][n] = [], [], []
        out["naive"][n] = traffic("naive", n, d, dtype=dtype, device=device).hbm_bytes
        for m in out["sram_bytes"]:
            t = traffic(algo, n, d, dtype=dtype, device=device, sram_bytes=m)
            out["bytes"][n].append(t.hbm_bytes)
            out["ratio"][n].append(t.hbm_bytes / (n**2 * d**2 / m))
            out["blocks"][n].append((t.block_r, t.block_c))
    return out


def plot_comparisons_side_by_side(comparisons: dict):
    """One panel per {label: flashsim.course.kit.real_gpu.Comparison}: measured next to simulated bytes (log scale)."""
    fig = new_figure((4.2 * len(comparisons), 3.4))
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


def plot_theta_sweep(sweep: dict):
    """Left: flash HBM bytes vs SRAM size M (log-log) per N, with N²d²/M scaled to each first point. Right: the
    ratio bytes / (N²d²/M), flat where Θ(N²d²/M) holds."""
    from matplotlib.ticker import NullLocator
    fig = new_figure((9.0, 3.5))
    ax1, ax2 = fig.subplots(1, 2)
    m = np.asarray(sweep["sram_bytes"], float)
    for n in sweep["ns"]:
        b = np.asarray(sweep["bytes"][n], float)
        line, = ax1.loglog(m / 1024, b, "o-", label=f"N = {n}")
        theory = b[0] * m[0] / m
        ax1.loglog(m / 1024, theory, ":", color=line.get_color())
        ax1.axhline(sweep["naive"][n], color=line.get_color(), lw=0.8, ls="--")
        ax2.semilogx(m / 1024, sweep["ratio"][n], "o-", color=line.get_color(), label=f"N = {n}")
    ax1.set_xlabel("SRAM M (KiB)")
    ax1.set_ylabel("HBM bytes (one head)")
    ax1.set_title(f"{sweep['algo']}, d={sweep['d']}: dotted ∝ 1/M, dashed: naive", fontsize=9)
    ax1.legend(fontsize=7)
    ax2.set_xlabel("SRAM M (KiB)")
    for ax in (ax1, ax2):  # tick at the swept sizes, not at powers of ten
        ax.set_xticks(list(m / 1024), [f"{k:g}" for k in m / 1024], fontsize=8)
        ax.xaxis.set_minor_locator(NullLocator())
    ax2.set_ylabel("bytes / (N²d²/M)")
    ax2.set_ylim(bottom=0)
    ax2.set_title("flat ⇒ Θ(N²d²/M)", fontsize=9)
    fig.tight_layout()
    return fig


class RooflinePlot(LivePlot):
    """The device's roofline (attainable FLOP/s against arithmetic intensity) with one dot per {label: Traffic};
    `dram` (a Traffic with DRAM bytes) adds the same kernel at its DRAM intensity (chapter 09). New traffic on the
    same device moves the dots in place (they stay on the roofline, so the axes keep their limits)."""

    figsize = (6.8, 3.8)
    _COLORS = ("#7f7f7f", "#1f77b4", "#2ca02c", "#d62728")

    def draw(self, fig, points: dict, device: str = "h200", dram=None, title: str = ""):
        hw = get_device(device)
        self._peak, self._bw = peak_flops(hw, "fp16"), hw.hbm_bandwidth_bytes_per_s
        ax = fig.add_subplot()
        xs = np.logspace(-1, 4, 200)
        ax.loglog(xs, np.minimum(self._peak, xs * self._bw), "k-", lw=1.5, label=f"{hw.name} roofline")
        ax.axvline(self._peak / self._bw, color="0.6", ls=":", lw=1)
        self._dots = [ax.loglog([], [], "o", ms=9, color=color, label=label)[0]
                      for label, color in zip(points, self._COLORS)]
        self._dram = ax.loglog([], [], "s", ms=9, color="#2ca02c", label="DRAM")[0] if _has_dram(dram) else None
        ax.set_xlabel("arithmetic intensity (FLOP / byte)")
        ax.set_ylabel("attainable FLOP/s")
        self._title = ax.set_title("", fontsize=7)
        self._place(points, dram, title)
        self._legend = ax.legend(fontsize=7, loc="lower right")
        self.animate(*self._dots, *([self._dram] if self._dram else []), self._legend, self._title)

    def _place(self, points: dict, dram, title: str) -> list:
        """Put the dots at their intensities; returns their legend labels."""
        labels = []
        for dot, (label, t) in zip(self._dots, points.items()):
            x = t.flops / t.hbm_bytes
            dot.set_data([x], [min(self._peak, x * self._bw)])
            labels.append(f"{label}: {x:.0f} FLOP/B")
        if self._dram is not None:
            x = dram.flops / dram.dram_bytes
            self._dram.set_data([x], [min(self._peak, x * self._bw)])
            labels.append(f"flash2 (DRAM, after L2): {x:.0f} FLOP/B")
        for artist, label in zip(self._dots + ([self._dram] if self._dram else []), labels):
            artist.set_label(label)
        self._title.set_text("\n".join(textwrap.wrap(title, 110)))
        return labels

    def refresh(self, points: dict, device: str = "h200", dram=None, title: str = ""):
        if (device != self.args["device"] or list(points) != list(self.args["points"])
                or _has_dram(dram) != (self._dram is not None)):
            return False
        for text, label in zip(self._legend.get_texts()[1:], self._place(points, dram, title)):
            text.set_text(label)
        return True


def _has_dram(dram) -> bool:
    return dram is not None and bool(dram.dram_bytes)


def plot_roofline_points(points: dict, device: str = "h200", dram=None, title: str = ""):
    """The device's roofline (attainable FLOP/s against arithmetic intensity) with one dot per {label: Traffic};
    `dram` (a Traffic with DRAM bytes) adds the same kernel at its DRAM intensity."""
    return RooflinePlot(points=points, device=device, dram=dram, title=title).fig


def plot_fig2_left(left: dict):
    """FA1 Fig. 2 left, reproduced: HBM GB and runtime of standard attention and FlashAttention, simulated next to
    the paper (``flashsim.model.paper.fig2_left()``)."""
    fig = new_figure((8.4, 3.4))
    ax1, ax2 = fig.subplots(1, 2)
    std, fl = left["standard"], left["flashattention"]
    labels = ["standard", "FlashAttention"]
    x = np.arange(2)
    ax1.bar(x - 0.27, [std["hbm_gb"], fl["hbm_gb"]], 0.27, label="simulated, requested", color="#1f77b4")
    ax1.bar(x, [std["dram_gb"] or std["hbm_gb"], fl["dram_gb"] or fl["hbm_gb"]], 0.27,
            label="simulated, DRAM (L2 model)", color="#2ca02c")
    ax1.bar(x + 0.27, [std["paper_gb"], fl["paper_gb"]], 0.27, label="paper (measured)", color="#7f7f7f")
    ax1.set_xticks(x, labels)
    ax1.set_ylabel("HBM GB (fwd + bwd)")
    ax1.legend(fontsize=7)
    ax2.bar(x - 0.2, [std["roofline_ms"], fl["roofline_ms"]], 0.4, label="roofline (lower bound)", color="#1f77b4")
    ax2.bar(x + 0.2, [std["paper_runtime_ms"], fl["paper_runtime_ms"]], 0.4, label="paper (A100)", color="#7f7f7f")
    ax2.set_xticks(x, labels)
    ax2.set_ylabel("runtime (ms)")
    ax2.legend(fontsize=7)
    fig.suptitle("FA1 Fig. 2 left: GPT-2 medium attention (N=1024, d=64, batch 64 × 16 heads, fp16), A100", fontsize=9)
    fig.tight_layout()
    return fig


def plot_l2_rows(data: dict):
    """Requested vs DRAM bytes per configuration (log scale): simulated requested, L2-model DRAM, and the ncu
    measurements when ``data`` has them (:func:`flashsim.widgets.l2_rows`)."""
    rows = data["rows"]
    fig = new_figure((8.0, 3.6))
    ax = fig.add_subplot()
    x = np.arange(len(rows))
    measured = any(r["dram_measured"] is not None for r in rows)
    w = 0.2 if measured else 0.35
    ax.bar(x - 1.5 * w if measured else x - w / 2, [r["requested"] for r in rows], w, label="requested (kernel_io)",
           color="#1f77b4")
    ax.bar(x - 0.5 * w if measured else x + w / 2, [r["dram_simulated"] or 0 for r in rows], w,
           label="DRAM, L2 model", color="#2ca02c")
    if measured:
        ax.bar(x + 0.5 * w, [r["requested_measured"] or 0 for r in rows], w, label="requested, ncu", color="#9467bd")
        ax.bar(x + 1.5 * w, [r["dram_measured"] or 0 for r in rows], w, label="DRAM, ncu", color="#d62728")
    ax.set_xticks(x, [r["label"].replace(" N=", "\nN=").replace(" d=", "\nd=") for r in rows], fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("bytes")
    ax.set_title(data["source"], fontsize=8)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_block_sweep(sweep: dict):
    """Measured vs simulated K+V... bytes of the flash kernel against BLOCK_M ({block_m: Comparison}), with the
    1/BLOCK_M law through the first point."""
    from matplotlib.ticker import NullLocator
    fig = new_figure((6.0, 3.4))
    ax = fig.add_subplot()
    bms = np.asarray(list(sweep), float)
    meas = [c.measured_load_bytes or 0 for c in sweep.values()]
    sim = [c.simulated_load_bytes for c in sweep.values()]
    ax.loglog(bms, sim, "o-", color="#1f77b4", label="simulated loads (kernel_io)")
    ax.loglog(bms, meas, "x", ms=10, color="#d62728", label=f"measured loads ({next(iter(sweep.values())).backend})")
    ax.loglog(bms, sim[0] * bms[0] / bms, ":", color="k", label="∝ 1 / BLOCK_M")
    ax.set_xlabel("BLOCK_M (rows of Q per program)")
    ax.set_xticks(list(bms), [str(int(b)) for b in bms])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_ylabel("bytes loaded")
    c0 = next(iter(sweep.values()))
    ax.set_title(f"flash_fwd, N={c0.config['n']}, d={c0.config['d']}", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def figure_fa1_fig2_left():
    """figures/fa1_fig2_left.png"""
    return plot_fig2_left(fig2_left(l2=True))


def figure_theta_sweep():
    """figures/theta_sweep.png"""
    return plot_theta_sweep(theta_sweep())
