"""Chapter 00 dashboard: a first slider, to learn how the course's controls work.

Every dashboard of the course is built on :class:`flashsim.course.kit.dashboard.Dashboard`: its state lives in
attributes, ``update(...)`` changes it (and moves the controls, when they are shown) and returns the new readout,
and ``show()`` puts the controls, the readout and the figure on the page. Tests drive ``update`` directly::

    t = SliderTour(); t.update(n=8192); t.s_bytes     # 134217728: one head's S in fp16 is 128 MiB
"""
from __future__ import annotations

from flashsim.course.ch00.figures import DEFAULT_NS, MatrixBytesPlot, format_bytes
from flashsim.course.kit.dashboard import Dashboard, choice, slider
from flashsim.model.dtypes import dtype_bytes
from flashsim.model.hardware import device_names, get_device

__all__ = ["SliderTour"]


class SliderTour(Dashboard):
    """Chapter 00's first dashboard: how big is one head's N×N score matrix S, and which memory level of a device could hold it?

    Controls: a slider for N (powers of two) with a Play button that walks N upward, a dtype dropdown and a
    device preset dropdown. ``update(n=..., dtype=..., device=...)`` is what each control calls.
    """

    NS = DEFAULT_NS   # 128 ... 131072
    DTYPES = ("fp32", "fp16", "bf16")
    plot = MatrixBytesPlot
    layout = (("n",), ("dtype", "device"))

    def __init__(self, n: int = 1024, dtype: str = "fp16", device: str = "h200"):
        self.n, self.dtype, self.device = 1024, "fp16", "h200"
        self.update(n=n, dtype=dtype, device=device)

    def controls(self):
        return {"n": slider("sequence length N", [(f"{n:,}", n) for n in self.NS], play_ms=700, width="520px"),
                "dtype": choice("dtype", self.DTYPES), "device": choice("device", device_names())}

    # --- state ------------------------------------------------------------------------------------------------
    def apply(self, n: int | None = None, dtype: str | None = None, device: str | None = None) -> str:
        """Change any of N, dtype, device; returns the readout. Bad values raise FlashsimError naming the choices."""
        if n is not None:
            self.n = int(n)
        if dtype is not None:
            self.dtype = dtype
        if device is not None:
            get_device(device)   # validates
            self.device = device
        return self.readout()

    @property
    def s_bytes(self) -> int:
        """Bytes of one head's N×N matrix in the current dtype."""
        return self.n * self.n * dtype_bytes(self.dtype)

    def fits_in(self) -> str:
        """The smallest level of the device's hierarchy that holds S: "SRAM (one SM)", "L2" or "HBM only"."""
        hw = get_device(self.device)
        if self.s_bytes <= hw.sram_bytes:
            return "SRAM (one SM)"
        if self.s_bytes <= hw.l2_bytes:
            return "L2"
        return "HBM only"

    def readout(self) -> str:
        hw = get_device(self.device)
        return (f"N = {self.n:,}, {self.dtype}: S is {self.n:,} × {self.n:,} × {dtype_bytes(self.dtype)} B = "
                f"{self.s_bytes:,} bytes ({self.s_bytes / 2**20:,.2f} MiB). On {hw.name} it fits in: "
                f"{self.fits_in()} (SRAM per SM {hw.sram_bytes // 1024} KiB, L2 {format_bytes(hw.l2_bytes)})")

    def plot_args(self) -> dict:
        return {"n": self.n, "dtype": self.dtype, "device": self.device, "ns": self.NS}
