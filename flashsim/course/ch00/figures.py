"""Chapter 00 figures: how big the N×N attention matrix gets, against the memory levels of a device."""
from __future__ import annotations

import numpy as np

from flashsim.model.dtypes import dtype_bytes
from flashsim.model.hardware import get_device

__all__ = ["plot_matrix_bytes", "figure_matrix_bytes"]


def plot_matrix_bytes(n: int = 8192, dtype: str = "fp16", device: str = "h200", ns=None):
    """Bytes of one N×N matrix (the scores S of one head) vs N, log-log, with the device's SRAM per SM, L2 and
    (for GPUs) HBM capacity as horizontal lines; the current `n` is marked. Returns a Figure (chapter 00)."""
    from matplotlib.figure import Figure

    hw = get_device(device)
    ns = np.asarray(ns if ns is not None else [2 ** k for k in range(7, 18)], dtype=np.float64)
    b = dtype_bytes(dtype)
    fig = Figure(figsize=(6.4, 3.6))
    ax = fig.add_subplot()
    ax.loglog(ns, ns * ns * b, "-", color="#1f77b4", label=f"N×N matrix in {dtype} ({b} B/element)")
    cur = n * n * b
    ax.loglog([n], [cur], "o", color="#d62728", ms=9, label=f"N = {n}: {cur / 2**20:,.1f} MiB")
    levels = [("SRAM per SM", hw.sram_bytes, "#2ca02c"), ("L2", hw.l2_bytes, "#ff7f0e")]
    for label, size, color in levels:
        ax.axhline(size, ls="--", color=color, lw=1)
        pretty = f"{size / 2**20:.3g} MiB" if size >= 2**20 else f"{size / 1024:.0f} KiB"
        ax.text(ns[0], size * 1.25, f"{label} of {hw.name}: {pretty}", fontsize=8, color=color)
    ax.set_xlabel("sequence length N")
    ax.set_ylabel("bytes")
    ax.set_title("One head's attention matrix S = QKᵀ grows as N²", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, which="major", alpha=0.3)
    fig.tight_layout()
    return fig


def figure_matrix_bytes():
    """figures/matrix_bytes.png"""
    return plot_matrix_bytes(8192, "fp16", "h200")
