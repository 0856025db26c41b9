"""Chapter 08 dashboards: the causal tile grid animated in the FA2 loop order, and the ~2× saving as N grows.

``CausalTileAnimator().update(step=5)`` moves the animation; ``update(n=.., block_r=.., block_c=..)`` changes the
grid; ``state`` holds the counts and the bytes of K/V loaded so far. No kernel is needed to drive it.
"""
from __future__ import annotations

import math

import numpy as np

from flashsim.course.ch00.dashboards import widget_or_figure

__all__ = ["causal_kind_grid", "causal_partial_masks", "CausalTileAnimator", "causal_saving_sweep"]


def causal_kind_grid(n: int, block_r: int, block_c: int) -> np.ndarray:
    """(Tr, Tc) array of "skip" / "partial" / "full" for the causal score matrix (the reference rule of chapter 08,
    the same as the simulator's: tile (i, j) is skipped when j·Bc > min((i+1)·Br, N) − 1)."""
    from flashsim.solutions.ch08 import causal_tile_kind
    tr, tc = math.ceil(n / block_r), math.ceil(n / block_c)
    return np.array([[causal_tile_kind(i, j, block_r, block_c, n) for j in range(tc)] for i in range(tr)],
                    dtype=object)


def causal_partial_masks(n: int, block_r: int, block_c: int, limit: int = 4) -> dict:
    """{(i, j): element mask} of the first `limit` partial tiles (True = key column <= query row).

    Introduced in chapter 08.
    """
    from flashsim.solutions.ch08 import causal_tile_mask
    kinds = causal_kind_grid(n, block_r, block_c)
    tiles = [(i, j) for i in range(kinds.shape[0]) for j in range(kinds.shape[1]) if kinds[i, j] == "partial"]
    return {t: causal_tile_mask(*t, block_r, block_c, n) for t in tiles[:limit]}


class CausalTileAnimator:
    """The causal tile grid, one visited tile per step (FA2 order: i outer, j inner; skipped tiles never visited).

    state: kinds (grid), counts, step, n_steps (visited tiles), current (i, j), kv_bytes_loaded (so far, per head,
    fp16), kv_bytes_noncausal (what the non-causal loop loads in total).

    Introduced in chapter 08.
    """

    def __init__(self, n: int = 64, block_r: int = 8, block_c: int = 8, d: int = 64, elem_bytes: int = 2):
        self.d, self.elem_bytes = d, elem_bytes
        self.step = 0
        self.update(n=n, block_r=block_r, block_c=block_c)

    def update(self, step: int | str | None = None, n: int | None = None, block_r: int | None = None,
               block_c: int | None = None) -> dict:
        """Move to tile `step` (0 = none visited yet, "end" = all) and/or rebuild the grid (step resets to 0)."""
        if n is not None or block_r is not None or block_c is not None:
            self.n = int(n or self.n)
            self.block_r = int(block_r or self.block_r)
            self.block_c = int(block_c or self.block_c)
            self.kinds = causal_kind_grid(self.n, self.block_r, self.block_c)
            self.visited = [(i, j) for i in range(self.kinds.shape[0]) for j in range(self.kinds.shape[1])
                            if self.kinds[i, j] != "skip"]
            self.n_steps = len(self.visited)
            step = 0 if step is None else step
        if step is not None:
            step = self.n_steps if step == "end" else step
            self.step = int(min(max(step, 0), self.n_steps))
        self.state = self._state()
        return self.state

    def _cols(self, j: int) -> int:
        return min(self.block_c, self.n - j * self.block_c)

    def _state(self) -> dict:
        done = self.visited[: self.step]
        kv = sum(2 * self._cols(j) * self.d * self.elem_bytes for _, j in done)
        tr, tc = self.kinds.shape
        kv_full = tr * 2 * self.n * self.d * self.elem_bytes
        counts = {k: int((self.kinds == k).sum()) for k in ("skip", "partial", "full")}
        return {"kinds": self.kinds, "counts": counts, "step": self.step, "n_steps": self.n_steps,
                "current": done[-1] if done else None, "kv_bytes_loaded": kv, "kv_bytes_noncausal": kv_full,
                "kv_fraction_total": sum(2 * self._cols(j) * self.d * self.elem_bytes for _, j in self.visited)
                / kv_full}

    def figure(self):
        from flashsim.course.ch08.figures import plot_causal_tile_grid
        s = self.state
        title = (f"N={self.n}, Br={self.block_r}, Bc={self.block_c}: tile {s['step']}/{s['n_steps']} visited\n"
                 f"K/V loaded {s['kv_bytes_loaded']:,} B of {s['kv_bytes_noncausal']:,} B non-causal "
                 f"(whole loop: {s['kv_fraction_total']:.0%})")
        return plot_causal_tile_grid(self.kinds, self.n, self.block_r, self.block_c, upto=s["step"], title=title)

    @widget_or_figure
    def show(self, interval_ms: int = 300):
        """Play over the visited tiles, and sliders for N, Br and Bc (the grid is rebuilt when they move)."""
        import ipywidgets as W
        from flashsim.course.ch05.dashboards import png_image_widget, set_png

        img = png_image_widget(self.figure(), "flashsim-causal-grid-plot")
        play = W.Play(value=self.step, min=0, max=self.n_steps, interval=interval_ms, description="play")
        step = W.IntSlider(value=self.step, min=0, max=self.n_steps, description="tile")
        W.jslink((play, "value"), (step, "value"))
        n = W.SelectionSlider(options=[16, 32, 64, 128, 256], value=self.n, description="N",
                              continuous_update=False)
        br = W.SelectionSlider(options=[4, 8, 16, 32, 64], value=self.block_r, description="Br",
                               continuous_update=False)
        bc = W.SelectionSlider(options=[4, 8, 16, 32, 64], value=self.block_c, description="Bc",
                               continuous_update=False)

        def on_grid(_):
            self.update(n=n.value, block_r=br.value, block_c=bc.value)
            play.max = step.max = self.n_steps
            play.value = step.value = self.step
            set_png(img, self.figure())

        def on_step(ch):
            self.update(step=ch["new"])
            set_png(img, self.figure())

        for w in (n, br, bc):
            w.observe(on_grid, names="value")
        step.observe(on_step, names="value")
        self._widgets = {"play": play, "step": step, "n": n, "block_r": br, "block_c": bc, "image": img}
        return W.VBox([W.HBox([play, step]), W.HBox([n, br, bc]), img])


def causal_saving_sweep(ns=(256, 512, 1024, 2048, 4096, 8192), d: int = 64, block_r: int = 128,
                        block_c: int = 64, algo: str = "flash2", device: str = "h200") -> dict:
    """flashsim.traffic, causal and not, over N (tqdm bar): {"ns", "noncausal": {"HBM bytes", "FLOPs"},
    "causal": {...}}.

    Introduced in chapter 08.
    """
    from tqdm.auto import tqdm
    from flashsim.model.simulator import traffic
    out = {"ns": list(ns), "noncausal": {"HBM bytes": [], "FLOPs": []}, "causal": {"HBM bytes": [], "FLOPs": []}}
    for n in tqdm(list(ns), desc="causal vs non-causal", leave=False):
        for key, causal in (("noncausal", False), ("causal", True)):
            t = traffic(algo, n, d, block_r=block_r, block_c=block_c, causal=causal, device=device)
            out[key]["HBM bytes"].append(t.hbm_bytes)
            out[key]["FLOPs"].append(t.flops)
    return out
