"""Shared by the chapters' plot modules (not re-exported)."""


def new_figure(figsize):
    """A matplotlib Figure not attached to pyplot: safe in threads and under Agg, never shown twice (chapter 00)."""
    from matplotlib.figure import Figure

    return Figure(figsize=figsize)
