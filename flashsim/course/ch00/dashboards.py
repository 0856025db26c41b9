"""Chapter 00 dashboard: a first slider, to learn how the course's controls work.

Every dashboard of the course is a plain class: its state lives in attributes, ``update(...)`` changes it and
returns the new readout, and ``show()`` wraps the same methods in ipywidgets (imported lazily, so this module
imports on a machine without Jupyter). Tests drive ``update`` directly::

    t = SliderTour(); t.update(n=8192); t.s_bytes     # 134217728: one head's S in fp16 is 128 MiB
"""
from __future__ import annotations

import re

from flashsim.model.dtypes import dtype_bytes
from flashsim.errors import FlashsimError
from flashsim.model.hardware import device_names, get_device

__all__ = ["SliderTour", "widget_or_figure"]


def widget_or_figure(show):
    """Decorator for a dashboard's ``show()`` (chapter 00; chapters 01-04 use it): where ipywidgets is not
    installed (a bare GPU machine running the notebooks at full size), print one line and the readout and return
    the static figure instead of the controls, so the notebook still runs top to bottom."""
    import functools

    @functools.wraps(show)
    def wrapper(self, *args, **kwargs):
        try:
            import ipywidgets  # noqa: F401
        except ImportError:
            print("ipywidgets is not installed: showing a static view (pip install ipywidgets for the controls)")
            if hasattr(self, "readout"):
                print(re.sub(r"<[^>]+>", "", self.readout()))
            return self.figure()
        return show(self, *args, **kwargs)

    return wrapper


class SliderTour:
    """Chapter 00's first dashboard: how big is one head's N×N score matrix S, and which memory level of a device could hold it?

    Controls: a slider for N (powers of two), a Play button that walks N upward, a dtype dropdown and a device
    preset dropdown. ``update(n=..., dtype=..., device=...)`` is what each control calls.
    """

    NS = tuple(2 ** k for k in range(7, 18))   # 128 ... 131072
    DTYPES = ("fp32", "fp16", "bf16")

    def __init__(self, n: int = 1024, dtype: str = "fp16", device: str = "h200"):
        self.n, self.dtype, self.device = 1024, "fp16", "h200"
        self.update(n=n, dtype=dtype, device=device)

    # --- state ------------------------------------------------------------------------------------------------
    def update(self, n: int | None = None, dtype: str | None = None, device: str | None = None) -> str:
        """Change any of N, dtype, device; returns the readout. Bad values raise FlashsimError naming the choices."""
        if n is not None:
            if int(n) not in self.NS:
                raise FlashsimError(f"n={n}: the slider offers powers of two {self.NS[0]}..{self.NS[-1]}")
            self.n = int(n)
        if dtype is not None:
            if dtype not in self.DTYPES:
                raise FlashsimError(f"dtype={dtype!r}: use one of {self.DTYPES}")
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
                f"{self.fits_in()} (SRAM per SM {hw.sram_bytes // 1024} KiB, L2 {hw.l2_bytes / 2**20:.0f} MiB)")

    def figure(self):
        from flashsim.course.ch00.figures import plot_matrix_bytes
        return plot_matrix_bytes(self.n, self.dtype, self.device, ns=self.NS)

    # --- ipywidgets ---------------------------------------------------------------------------------------------
    @widget_or_figure
    def show(self):
        """The dashboard: Play + N slider, dtype and device dropdowns, the readout and the plot."""
        import ipywidgets as W
        from flashsim.course.ch05.dashboards import play_controls, png_image_widget, set_png

        text = W.HTML(self.readout())
        img = png_image_widget(self.figure())

        def redraw():
            text.value = self.readout()
            set_png(img, self.figure())

        def on_step(i):
            self.update(n=self.NS[i])
            redraw()

        box, _, slider = play_controls(len(self.NS), on_step, description="log2 N − 7", interval_ms=700,
                                       value=self.NS.index(self.n))
        dt = W.Dropdown(options=self.DTYPES, value=self.dtype, description="dtype")
        dev = W.Dropdown(options=device_names(), value=self.device, description="device")
        dt.observe(lambda ch: (self.update(dtype=ch["new"]), redraw()), names="value")
        dev.observe(lambda ch: (self.update(device=ch["new"]), redraw()), names="value")
        return W.VBox([box, W.HBox([dt, dev]), text, img])
