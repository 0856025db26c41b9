"""Chapter 08 figures: the causal tile grid (skipped / partial / full), a partial tile's mask, and the ~2× saving.
Every function returns a matplotlib Figure (Agg-safe: no pyplot); :class:`CausalTileGridPlot` is the animator's
figure, recoloured in place as the Play button walks the tiles."""
from __future__ import annotations

import numpy as np

from flashsim.course.kit.plotting import LivePlot
from flashsim.model.attention.visibility import causal_mask, n_blocks, tile_visible

__all__ = ["plot_causal_tile_grid", "plot_causal_saving", "plot_tile_masks",
           "figure_causal_tiles"]

_KIND_COLORS = {"skip": "#f0f0f0", "partial": "#ff7f0e", "full": "#1f77b4"}


def causal_kind_grid(n: int, block_r: int, block_c: int) -> np.ndarray:
    """(Tr, Tc) array of "skip" / "partial" / "full" for the causal score matrix: the model's visibility rule
    (:mod:`flashsim.model.attention.visibility`: tile (i, j) is skipped when j·Bc > min((i+1)·Br, N) − 1, full
    when no element of it is masked). Introduced in chapter 08."""
    tr, tc = n_blocks(n, block_r), n_blocks(n, block_c)

    def kind(i, j):
        if not tile_visible(i, j, block_r, block_c, n):
            return "skip"
        rows, cols = min(block_r, n - i * block_r), min(block_c, n - j * block_c)
        return "full" if causal_mask(i * block_r, rows, j * block_c, cols) is None else "partial"

    return np.array([[kind(i, j) for j in range(tc)] for i in range(tr)], dtype=object)


class CausalTileGridPlot(LivePlot):
    """Tile grid (rows: Q blocks i, columns: K/V blocks j) coloured by kind, with the element-level causal mask
    behind it; ``upto`` tiles of the FA2 loop order are done (later ones faded, the current one outlined). The
    grid is drawn in units of N (the axes run 0…1 whatever N is, and name N in the title), so every change is made
    in place and blitted: a new ``upto`` recolours the tiles; a new N, Br or Bc also redraws the mask and the
    tiles (chapter 08)."""

    figsize = (5.4, 3.9)
    tight = False               # fixed margins: the square grid and the legend beside it keep their places

    def draw(self, fig, kinds: np.ndarray, n: int, block_r: int, block_c: int, upto: int | None = None,
             title: str = ""):
        from matplotlib.collections import PolyCollection
        from matplotlib.patches import Patch

        fig.subplots_adjust(left=0.1, right=0.7, bottom=0.13, top=0.92)
        ax = self._ax = fig.add_subplot()
        from matplotlib import colormaps
        greys = colormaps["Greys"]
        ax.set_facecolor(greys(0.0))           # masked elements (c > r); the visible ones: one staircase polygon
        self._mask = ax.add_collection(PolyCollection([], facecolors=[greys(0.25)], edgecolors="none"),
                                       autolim=False)
        # every tile is one polygon of one collection (recolouring the grid is one artist to draw), the current
        # tile's red outline a second one drawn on top
        self._tiles = ax.add_collection(PolyCollection([], edgecolors="white", linewidths=0.8), autolim=False)
        self._current = ax.add_collection(PolyCollection([], facecolors="none", edgecolors="#d62728",
                                                         linewidths=3), autolim=False)
        ax.set_xlim(0, 1)
        ax.set_ylim(1, 0)
        ax.set_aspect("equal")
        ax.set_xticks([0, 1], ["0", "N"])
        ax.set_yticks([0, 1], ["0", "N"])
        ax.set_xlabel("key column c  (K/V blocks of Bc)", fontsize=8)
        ax.set_ylabel("query row r  (Q blocks of Br)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(handles=[Patch(color=_KIND_COLORS[k], label=k) for k in _KIND_COLORS],
                  loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=8, frameon=False)
        self._counts = ax.text(1.04, 0.62, "", transform=ax.transAxes, fontsize=8, va="top")
        self._title = ax.set_title("", fontsize=8)
        self.animate(self._mask, self._tiles, self._current, self._counts, self._title)
        self._grid(kinds, n, block_r, block_c)
        self._colour(kinds, n, block_r, block_c, upto, title)

    def _grid(self, kinds, n, block_r, block_c) -> None:
        """The mask, the tiles' outlines (in units of N) and the counts for a grid."""
        tr, tc = kinds.shape
        self._keys, self._verts = [], []
        for i in range(tr):
            for j in range(tc):
                y0, x0 = i * block_r, j * block_c
                x1, y1 = min(x0 + block_c, n), min(y0 + block_r, n)
                self._verts.append([(x0 / n, y0 / n), (x1 / n, y0 / n), (x1 / n, y1 / n), (x0 / n, y1 / n)])
                self._keys.append((i, j))
        self._tiles.set_verts(self._verts)
        self._mask.set_verts([_causal_staircase(n)])
        self._counts.set_text("\n".join(f"{k}: {int((kinds == k).sum())} tiles" for k in _KIND_COLORS))

    def _colour(self, kinds, n, block_r, block_c, upto, title) -> None:
        from matplotlib.colors import to_rgba

        tr, tc = kinds.shape
        visited = [(i, j) for i in range(tr) for j in range(tc) if kinds[i, j] != "skip"]
        done = set(visited if upto is None else visited[:upto])
        current = visited[upto - 1] if upto else None
        self._tiles.set_facecolor([to_rgba(_KIND_COLORS[kinds[i, j]],
                                           0.75 if (kinds[i, j] == "skip" or (i, j) in done) else 0.2)
                                   for i, j in self._keys])
        self._current.set_verts([self._verts[self._keys.index(current)]] if current is not None else [])
        self._title.set_text(title or f"N={n}, Br={block_r}, Bc={block_c}")

    def refresh(self, kinds, n, block_r, block_c, upto=None, title=""):
        if (n, block_r, block_c) != (self.args["n"], self.args["block_r"], self.args["block_c"]):
            self._grid(kinds, n, block_r, block_c)
        self._colour(kinds, n, block_r, block_c, upto, title)
        return True


def _causal_staircase(n: int) -> list:
    """The visible elements (key column c <= query row r) of an N x N score matrix as one polygon, in units of N
    (rows downwards): the picture behind the tiles."""
    pts = [(0.0, 0.0)]
    for r in range(n):
        pts += [((r + 1) / n, r / n), ((r + 1) / n, (r + 1) / n)]
    return pts + [(0.0, 1.0)]


def plot_causal_tile_grid(kinds: np.ndarray, n: int, block_r: int, block_c: int, *, upto: int | None = None,
                          title: str = ""):
    """Tile grid (rows: Q blocks i, columns: K/V blocks j) coloured by kind, with the element-level causal mask
    behind it. ``kinds`` holds "skip" / "partial" / "full"; ``upto`` = how many tiles of the FA2 loop order
    (i outer, j inner, skipped tiles not visited) are done: later tiles are faded, the current one outlined.

    Introduced in chapter 08.
    """
    return CausalTileGridPlot(kinds=kinds, n=n, block_r=block_r, block_c=block_c, upto=upto, title=title).fig


def plot_causal_saving(ns, noncausal: dict, causal: dict, title: str = ""):
    """HBM bytes and FLOPs, causal / non-causal, against N (→ 1/2). ``noncausal`` and ``causal`` map a
    quantity name ("HBM bytes", "FLOPs") to a list over ``ns``.

    Introduced in chapter 08.
    """
    from matplotlib.figure import Figure
    fig = Figure(figsize=(6.4, 3.6))
    ax = fig.add_subplot()
    for key, marker in zip(noncausal, "os^"):
        ratio = np.asarray(causal[key], float) / np.asarray(noncausal[key], float)
        ax.plot(ns, ratio, marker=marker, label=f"{key}: causal / non-causal")
    ax.axhline(0.5, color="grey", linestyle="--", linewidth=1, label="1/2")
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("sequence length N")
    ax.set_ylabel("fraction of the non-causal cost")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_tile_masks(masks: dict, block_r: int, block_c: int):
    """The element masks of some tiles, {(i, j): bool array (rows, cols)}, True = key visible (dark).

    Introduced in chapter 08.
    """
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator
    fig = Figure(figsize=(2.6 * len(masks), 2.8))
    for k, ((i, j), mask) in enumerate(masks.items()):
        ax = fig.add_subplot(1, len(masks), k + 1)
        mask = np.asarray(mask, bool)
        ax.imshow(mask, cmap="Blues", vmin=-0.3, vmax=1, interpolation="nearest",
                  extent=(j * block_c - 0.5, j * block_c + mask.shape[1] - 0.5,
                          i * block_r + mask.shape[0] - 0.5, i * block_r - 0.5))
        ax.set_title(f"tile ({i}, {j}): {int(mask.sum())}/{mask.size} visible", fontsize=8)
        ax.set_xlabel("key column c", fontsize=8)
        ax.set_ylabel("query row r", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle("dark = key visible (c ≤ r), light = masked to −∞", fontsize=9)
    fig.tight_layout()
    return fig


def figure_causal_tiles():
    """figures/causal_tiles.png

    The causal tile grid at N=256, Br=Bc=32: skipped, partial and full tiles.

    Introduced in chapter 08.
    """
    return plot_causal_tile_grid(causal_kind_grid(256, 32, 32), 256, 32, 32,
                                 title="Causal FlashAttention, N=256, Br=Bc=32: tiles above the diagonal are skipped")
