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
      ``plot_*`` function), keep handles on the ones a control changes, and pass those to :meth:`animate`;
    - ``refresh(**args) -> bool`` (optional): change those artists for new ``args`` (``set_data``, ``set_height``,
      ``set_text``, colours, limits) and return True; return "refresh" when it also changed artists that are not
      animated (the whole figure is rendered, not rebuilt); return False when the change alters the figure's
      structure (another number of bars, other axes): :meth:`set` then clears the figure and draws it again.

    Why in place: re-building a figure and rendering it to PNG took 0.3–0.8 s per slider move, and
    most of a full render is spent on the axes (ticks, tick labels), not on the data. So a refresh that leaves
    every axis' limits alone (or moves only the limits of an axis marked animated) is drawn by *blitting*: the
    page's figure keeps the picture of everything that is not animated (the background) and only the animated
    artists are drawn again on top of it
    (:class:`flashsim.course.kit.render.FigureView`). A refresh that moves a limit, and a redraw, render the whole
    figure. The layout (``tight_layout``) is computed when the figure is first drawn and after a redraw, not on
    every refresh, so the axes do not jump while a slider moves. Animated artists are drawn in saved figures too
    (matplotlib draws them when saving), so the static figure is unchanged.
    """

    figsize: tuple = (6.4, 3.6)
    tight: bool = True      # run tight_layout after draw (False: the subclass lays the figure out itself)

    def __init__(self, **args):
        self.fig = new_figure(self.figsize)
        self.args = args
        self.animated: list = []
        self.draw(self.fig, **args)
        self._layout()

    def draw(self, fig, **args) -> None:   # pragma: no cover - every subclass implements it
        raise NotImplementedError

    def refresh(self, **args) -> bool | str:
        """Change the existing artists for `args`: True (blit them), "refresh" (render the whole figure) or False
        (the default: clear and draw the figure again)."""
        return False

    def animate(self, *artists):
        """Mark artists that :meth:`refresh` changes: they are drawn over the cached background, in this order
        (an artist that must sit on top of another animated one comes after it). Returns the first one."""
        for a in artists:
            a.set_animated(True)
            self.animated.append(a)
        return artists[0] if artists else None

    def limits(self) -> tuple:
        """The view limits of every axes: a refresh that keeps them can be blitted. The limits of an axis that is
        itself animated (``self.animate(ax.yaxis)``: its ticks, tick labels and label are drawn with every frame)
        may move in a blitted frame, so they are left out."""
        return tuple((None if ax.xaxis.get_animated() else tuple(ax.get_xlim()),
                      None if ax.yaxis.get_animated() else tuple(ax.get_ylim())) for ax in self.fig.axes)

    def set(self, **args) -> str:
        """Show `args`: in place when :meth:`refresh` can, else by clearing and redrawing the figure.
        Returns "blit" (only animated artists changed), "refresh" (in place, but a limit moved, or :meth:`refresh`
        returned "refresh": it changed an artist that is not animated) or "redraw"."""
        before = self.limits()
        done = self.refresh(**args)
        if done:
            self.args = args
            return "blit" if done != "refresh" and self.animated and self.limits() == before else "refresh"
        self.fig.clear()
        self.fig.subplots_adjust(**_DEFAULT_SUBPLOT_PARAMS())   # lay out from where a fresh figure starts
        self.args = args
        self.animated = []
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
