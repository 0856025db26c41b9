"""Chapter 00 figures: how big the N×N attention matrix gets, against the memory levels of a device."""
from __future__ import annotations

import numpy as np

from flashsim.course.kit.plotting import LivePlot
from flashsim.model.dtypes import dtype_bytes
from flashsim.model.hardware import get_device
from flashsim.model.units import format_bytes  # re-exported: the course's byte units (binary, 3 digits)

__all__ = ["MatrixBytesPlot", "plot_matrix_bytes", "figure_matrix_bytes", "format_bytes"]

DEFAULT_NS = tuple(2 ** k for k in range(7, 18))   # 128 ... 131072


class MatrixBytesPlot(LivePlot):
    """Bytes of one N×N matrix vs N (log-log) with the device's SRAM per SM and L2 as horizontal lines; the
    current `n` is marked. A new `n` moves the marker; a new dtype or device redraws (chapter 00)."""

    figsize = (6.4, 3.6)

    def draw(self, fig, n, dtype, device, ns):
        hw = get_device(device)
        ns = np.asarray(ns, dtype=np.float64)
        b = dtype_bytes(dtype)
        ax = fig.add_subplot()
        ax.loglog(ns, ns * ns * b, "-", color="#1f77b4", label=f"N×N matrix in {dtype} ({b} B/element)")
        cur = n * n * b
        (self._point,) = ax.loglog([n], [cur], "o", color="#d62728", ms=9, label="the slider's N")
        self._note = ax.annotate(self._label(n, cur), (n, cur), textcoords="offset points", xytext=(-10, 8),
                                 ha="right", fontsize=8, color="#d62728")
        for label, size, color in (("SRAM per SM", hw.sram_bytes, "#2ca02c"), ("L2", hw.l2_bytes, "#ff7f0e")):
            ax.axhline(size, ls="--", color=color, lw=1)
            ax.text(ns[0], size * 1.25, f"{label} of {hw.name}: {format_bytes(size)}", fontsize=8, color=color)
        ax.set_xlabel("sequence length N")
        ax.set_ylabel("bytes")
        ax.set_title("One head's attention matrix S = QKᵀ grows as N²", fontsize=10)
        ax.legend(fontsize=8, loc="lower right")
        ax.grid(True, which="major", alpha=0.3)
        # a legend is several texts and boxes: the changing numbers sit in one annotation instead
        self.animate(self._point, self._note)

    @staticmethod
    def _label(n, nbytes):
        return f"N = {n:,}: {format_bytes(nbytes)}"

    def refresh(self, n, dtype, device, ns):
        if (dtype, device, tuple(ns)) != (self.args["dtype"], self.args["device"], tuple(self.args["ns"])):
            return False
        cur = n * n * dtype_bytes(dtype)
        self._point.set_data([n], [cur])
        self._note.xy = (n, cur)
        self._note.set_text(self._label(n, cur))
        return True


def plot_matrix_bytes(n: int = 8192, dtype: str = "fp16", device: str = "h200", ns=None):
    """Bytes of one N×N matrix (the scores S of one head) vs N, log-log, with the device's SRAM per SM and L2 as
    horizontal lines; the current `n` is marked. Returns a Figure (chapter 00)."""
    return MatrixBytesPlot(n=n, dtype=dtype, device=device, ns=tuple(ns if ns is not None else DEFAULT_NS)).fig


def figure_matrix_bytes():
    """figures/matrix_bytes.png"""
    return plot_matrix_bytes(8192, "fp16", "h200")
