"""Matplotlib figures for every chapter's figures module: a Figure not attached to pyplot, its PNG bytes, and
:class:`LivePlot`, a figure that is drawn once and then changed in place (what a dashboard shows).

matplotlib is imported inside the functions: ``flashsim.course`` imports on a GPU machine without it.
"""
from __future__ import annotations

__all__ = ["new_figure", "figure_to_png", "LivePlot"]


def new_figure(figsize, dpi: float | None = None):
    """A matplotlib Figure not attached to pyplot: safe in threads and under Agg, never shown twice."""
    from matplotlib.figure import Figure

    return Figure(figsize=figsize, dpi=dpi)


def figure_to_png(fig, dpi: int = 80) -> bytes:
    """PNG bytes of a Figure, drawn afresh at `dpi` (what the static fallback and ``make figures`` save)."""
    import io
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def _DEFAULT_SUBPLOT_PARAMS() -> dict:
    from matplotlib import rcParams
    return {k: rcParams[f"figure.subplot.{k}"] for k in ("left", "right", "bottom", "top", "wspace", "hspace")}


class LivePlot:
    """A figure drawn once for some arguments, then changed in place when they change.

    A subclass sets ``figsize`` and implements:

    - ``draw(fig, **args)``: build the axes and artists for ``args`` (the keyword arguments of the chapter's
      ``plot_*`` function) and keep handles on the ones a control changes;
    - ``refresh(**args) -> bool`` (optional): change those artists for new ``args`` (``set_data``, ``set_height``,
      ``set_text``, colours, limits) and return True; return False when the change alters the figure's structure
      (another number of bars, other axes): :meth:`set` then clears the figure and draws it again.

    Why in place: re-building a figure and rendering it to PNG took 0.3–0.8 s per slider move (issue 12); changing
    a few artists and re-rendering the existing canvas takes a fraction of that (numbers in
    ``benchmarks/results/dashboard_latency_*``). The layout (``tight_layout``) is computed when the figure is first
    drawn and after a structural redraw, not on every refresh, so the axes do not jump while a slider moves.
    """

    figsize: tuple = (6.4, 3.6)
    tight: bool = True      # run tight_layout after draw (False: the subclass lays the figure out itself)

    def __init__(self, **args):
        self.fig = new_figure(self.figsize)
        self.args = args
        self.draw(self.fig, **args)
        self._layout()

    def draw(self, fig, **args) -> None:   # pragma: no cover - every subclass implements it
        raise NotImplementedError

    def refresh(self, **args) -> bool:
        """Change the existing artists for `args`; False (the default) asks for a full redraw."""
        return False

    def set(self, **args) -> str:
        """Show `args`: in place when :meth:`refresh` can, else by clearing and redrawing the figure.
        Returns "refresh" or "redraw" (what happened)."""
        if self.refresh(**args):
            self.args = args
            return "refresh"
        self.fig.clear()
        self.fig.subplots_adjust(**_DEFAULT_SUBPLOT_PARAMS())   # lay out from where a fresh figure starts
        self.args = args
        self.draw(self.fig, **args)
        self._layout()
        return "redraw"

    def set_dpi(self, dpi: float) -> None:
        """Show the figure at `dpi` (the live figure on the page), laid out again at that resolution."""
        self.fig.set_dpi(dpi)
        self._layout()

    def _layout(self) -> None:
        if self.tight:
            self.fig.tight_layout()
