"""Putting a dashboard's figure on the page (course kit; every chapter's dashboards use it).

:class:`FigureView` shows a matplotlib Figure as a widget that redraws in place: an ipympl canvas when ipympl is
installed (``draw_idle``: the browser asks for a frame when it is ready, so quick slider moves coalesce, and only
the changed pixels travel), else an ``ipywidgets.Image`` whose PNG is re-encoded from the existing
canvas. Either way a frame is encoded by :func:`png_rgba` (fast, unfiltered PNG).
:func:`static_view` is the fallback without ipywidgets at all (a GPU machine running the notebooks as plain
Python): one line, the readout as text, and the static figure.

ipywidgets, ipympl and matplotlib are imported inside the functions, so this module imports without them.
"""
from __future__ import annotations

import re

from flashsim.course.kit.plotting import figure_to_png

__all__ = ["FigureView", "has_ipywidgets", "has_ipympl", "static_view", "png_rgba", "LIVE_DPI", "DEFAULT_MODE"]

#: dots per inch of a live figure on the page (the PNGs the course showed before were 80 dpi)
LIVE_DPI = 80
#: "ipympl" or "image" to force how figures are shown (None: ipympl where it is installed; tests set "image")
DEFAULT_MODE: str | None = None


def has_ipywidgets() -> bool:
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


def has_ipympl() -> bool:
    try:
        import ipympl.backend_nbagg  # noqa: F401
    except ImportError:
        return False
    return True


def html_to_text(html: str) -> str:
    """A readout's HTML as plain text (tags dropped, <br> as a newline)."""
    return re.sub(r"<[^>]+>", "", re.sub(r"<br\s*/?>", "\n", html))


def static_view(readout: str | None, figure):
    """Without ipywidgets: print one line and the readout, return the static figure (Jupyter displays it)."""
    print("ipywidgets is not installed: showing a static view (pip install ipywidgets for the controls)")
    if readout:
        print(html_to_text(readout))
    return figure


def png_rgba(pixels, level: int = 1) -> bytes:
    """PNG bytes of an (H, W, 4) uint8 RGBA array: no row filter, zlib at `level`.

    What every live frame is encoded with. PIL's encoder tries a filter per row and compresses at level 6: an
    880 × 608 frame took ≈ 17 ms (a blit's mostly transparent diff) to ≈ 29 ms (a whole figure) on the course's
    2-core CPU, against ≈ 4 ms and ≈ 8 ms here, for frames a tenth larger, which travel on localhost."""
    import struct
    import zlib

    import numpy as np
    h, w, _ = pixels.shape
    raw = np.empty((h, 4 * w + 1), np.uint8)   # (H, 1 + 4W): each row starts with its filter byte, 0 = none
    raw[:, 0] = 0
    raw[:, 1:] = np.asarray(pixels, np.uint8).reshape(h, 4 * w)

    def chunk(tag: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 6, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw.tobytes(), level)) + chunk(b"IEND", b""))


_FAST_CANVAS = None


def _fast_canvas_class():
    """ipympl's Canvas whose frames are encoded by :func:`png_rgba` (ipympl sends every frame as a PNG of the
    whole figure: after a blit, the changed pixels with the rest transparent zeros)."""
    global _FAST_CANVAS
    if _FAST_CANVAS is None:
        import numpy as np
        from ipympl.backend_nbagg import Canvas

        class FastCanvas(Canvas):
            #: the last full renders' durations (ms), newest last: benchmarks/dashboard_latency.py reads them
            draw_ms: list = []

            def draw(self):
                import time
                t0 = time.perf_counter()
                try:
                    super().draw()
                finally:
                    self.draw_ms = (self.draw_ms + [round((time.perf_counter() - t0) * 1e3, 1)])[-64:]

            def get_diff_image(self):
                # matplotlib's FigureCanvasWebAggCore.get_diff_image, with the fast PNG
                if not self._png_is_old:
                    return None
                pixels = np.asarray(self.get_renderer().buffer_rgba())
                buff = pixels.view(np.uint32).squeeze(2)
                if (self._force_full or buff.shape != self._last_buff.shape
                        or (pixels[:, :, 3] != 255).any()):
                    self.set_image_mode("full")
                    output = buff
                else:
                    self.set_image_mode("diff")
                    output = np.where(buff != self._last_buff, buff, 0)
                self._last_buff = buff.copy()
                self._force_full = False
                self._png_is_old = False
                return png_rgba(output.view(np.uint8).reshape((*output.shape, 4)))

        _FAST_CANVAS = FastCanvas
    return _FAST_CANVAS


class FigureView:
    """A LivePlot's figure on the page: ``refresh(how)`` after :meth:`LivePlot.set` said how it changed.

    ``mode`` is "ipympl" (an ipympl Canvas widget) or "image" (an ipywidgets.Image, PNG encoded from the figure's
    Agg buffer with fast compression). A "blit" restores the background saved at the last full render and draws
    the plot's animated artists over it (a few ms: no axes, no ticks); anything else renders the whole figure
    (ipympl: ``draw_idle``, drawn when the browser asks, so quick moves coalesce). After every full render the
    background is saved again and the animated artists drawn on top (matplotlib's ``draw_event``).
    ``widget`` goes into the dashboard's box; ``frames`` counts refreshes and ``blits`` the blitted ones (tests
    read them); ``png()`` renders the current state afresh.
    """

    def __init__(self, plot, css_class: str | None = None, mode: str | None = None):
        import ipywidgets as W
        self.plot = plot
        self.fig = fig = plot.fig
        self.mode = mode or DEFAULT_MODE or ("ipympl" if has_ipympl() else "image")
        self.frames = self.blits = 0
        self.refresh_ms: list = []
        self._background = None
        if fig.dpi != LIVE_DPI:
            fig.set_dpi(LIVE_DPI)
        if self.mode == "ipympl":
            from ipympl.backend_nbagg import FigureManager
            canvas = _fast_canvas_class()(fig)
            self._manager = FigureManager(canvas, 0)   # ipympl's canvas needs a manager; pyplot never sees it
            canvas.header_visible = False
            canvas.footer_visible = False
            canvas.toolbar_visible = False
            canvas.resizable = False
            canvas.capture_scroll = False
            self.widget = canvas
        else:
            from matplotlib.backends.backend_agg import FigureCanvasAgg
            FigureCanvasAgg(fig)
        fig.canvas.mpl_connect("draw_event", self._on_draw)
        if self.mode == "image":
            self.widget = W.Image(value=self._encode(full=True), format="png", layout=W.Layout(max_width="100%"))
        if css_class:
            self.widget.add_class(css_class)

    def _on_draw(self, event) -> None:
        """After a full render (animated artists left out): save the background, then draw them on top. Not while
        the figure is being saved (``png()``): savefig draws the animated artists itself, so drawing them again
        would paint them twice and the saved renderer's background is not the screen's."""
        canvas = self.fig.canvas
        if canvas.is_saving():
            return
        self._background = canvas.copy_from_bbox(self.fig.bbox)
        self._draw_animated()

    def _draw_animated(self) -> None:
        for artist in self.plot.animated:
            self.fig.draw_artist(artist)

    def _encode(self, full: bool) -> bytes:
        """PNG of the Agg buffer, after a full render (`full`) or as blitted (fast compression, no second draw)."""
        import numpy as np
        if full:
            self.fig.canvas.draw()
        return png_rgba(np.asarray(self.fig.canvas.buffer_rgba()))

    def refresh(self, how: str = "redraw") -> None:
        """Show the plot's new state: "blit" when only animated artists changed, else a full render."""
        import time
        t0 = time.perf_counter()
        try:
            self._refresh(how)
        finally:   # (how, ms) of the last refreshes, newest last: benchmarks/dashboard_latency.py reads them
            self.refresh_ms = (self.refresh_ms + [(how, round((time.perf_counter() - t0) * 1e3, 1))])[-64:]

    def _refresh(self, how: str) -> None:
        self.frames += 1
        canvas = self.fig.canvas
        if how == "blit" and self._background is not None:
            self.blits += 1
            canvas.restore_region(self._background)
            self._draw_animated()
            if self.mode == "ipympl":
                canvas.blit(self.fig.bbox)        # ipympl sends the changed pixels
            else:
                self.widget.value = self._encode(full=False)
            return
        self._background = None                   # stale until the next full render saves it again
        if self.mode == "ipympl":
            canvas.draw_idle()        # drawn when the browser asks for the frame
        else:
            self.widget.value = self._encode(full=True)

    def png(self) -> bytes:
        """The figure's current state rendered afresh as PNG (either mode)."""
        return figure_to_png(self.fig, dpi=LIVE_DPI)

    def shown_png(self) -> bytes:
        """The pixels the page shows now (the Agg buffer as last rendered or blitted), as PNG."""
        return self._encode(full=False)
