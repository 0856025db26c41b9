"""Chapter 08 dashboards: the causal tile grid animated in the FA2 loop order, and the ~2× saving as N grows.

``CausalTileAnimator().update(step=5)`` moves the animation; ``update(n=.., block_r=.., block_c=..)`` changes the
grid; ``state`` holds the counts and the bytes of K/V loaded so far. No kernel is needed to drive it.
"""
from __future__ import annotations

from flashsim.course.ch08.figures import CausalTileGridPlot, causal_kind_grid
from flashsim.course.kit.dashboard import Dashboard, int_range, slider
from flashsim.model.attention.visibility import causal_mask
from flashsim.model.simulator import traffic

__all__ = ["causal_kind_grid", "causal_partial_masks", "CausalTileAnimator", "causal_saving_sweep"]


def causal_partial_masks(n: int, block_r: int, block_c: int, limit: int = 4) -> dict:
    """{(i, j): element mask} of the first `limit` partial tiles (True = key column <= query row).

    Introduced in chapter 08.
    """
    kinds = causal_kind_grid(n, block_r, block_c)
    tiles = [(i, j) for i in range(kinds.shape[0]) for j in range(kinds.shape[1]) if kinds[i, j] == "partial"]
    return {(i, j): ~causal_mask(i * block_r, min(block_r, n - i * block_r), j * block_c,
                                 min(block_c, n - j * block_c), always=True) for i, j in tiles[:limit]}


class CausalTileAnimator(Dashboard):
    """The causal tile grid, one visited tile per step (FA2 order: i outer, j inner; skipped tiles never visited).

    state: kinds (grid), counts, step, n_steps (visited tiles), current (i, j), kv_bytes_loaded (so far, per head,
    fp16), kv_bytes_noncausal (what the non-causal loop loads in total). Controls: a Play button over the tiles and
    sliders for N, Br and Bc (a new grid resets the step to 0).

    Introduced in chapter 08.
    """

    BLOCKS = (4, 8, 16, 32, 64)
    plot = CausalTileGridPlot
    layout = (("step",), ("n", "block_r", "block_c"))
    figure_class = "flashsim-causal-grid-plot"

    def __init__(self, n: int = 64, block_r: int = 8, block_c: int = 8, d: int = 64, elem_bytes: int = 2,
                 interval_ms: int = 300):
        self.d, self.elem_bytes, self.interval_ms = d, elem_bytes, interval_ms
        self.n, self.block_r, self.block_c, self.step = int(n), int(block_r), int(block_c), 0
        self._grid()
        self.update(n=n, block_r=block_r, block_c=block_c)

    def controls(self):
        return {"step": int_range("tile", 0, self.n_steps, play_ms=self.interval_ms, width="420px"),
                "n": int_range("N", 8, 256), "block_r": slider("Br", sorted({*self.BLOCKS, self.block_r})),
                "block_c": slider("Bc", sorted({*self.BLOCKS, self.block_c}))}

    def update(self, step: int | str | None = None, n: int | None = None, block_r: int | None = None,
               block_c: int | None = None) -> dict:
        """Move to tile `step` (0 = none visited yet, "end" = all) and/or rebuild the grid (step resets to 0)."""
        if step == "end":
            if (n, block_r, block_c) != (None, None, None):
                super().update(n=n, block_r=block_r, block_c=block_c)      # the new grid first: its tile count
            return super().update(step=self.n_steps)
        return super().update(step=step, n=n, block_r=block_r, block_c=block_c)

    def apply(self, step: int | None = None, n: int | None = None, block_r: int | None = None,
              block_c: int | None = None) -> dict:
        grid = (int(n or self.n), int(block_r or self.block_r), int(block_c or self.block_c))
        if grid != (self.n, self.block_r, self.block_c):
            self.n, self.block_r, self.block_c = grid
            self._grid()
            step = 0 if step is None else step
        if step is not None:
            self.step = int(min(max(int(step), 0), self.n_steps))
        self.state = self._state()
        return self.state

    def _grid(self) -> None:
        self.kinds = causal_kind_grid(self.n, self.block_r, self.block_c)
        self.visited = [(i, j) for i in range(self.kinds.shape[0]) for j in range(self.kinds.shape[1])
                        if self.kinds[i, j] != "skip"]          # the FA2 loop order: i outer, j inner
        self.n_steps = len(self.visited)

    def _kv_bytes(self, tiles) -> int:
        return sum(2 * min(self.block_c, self.n - j * self.block_c) * self.d * self.elem_bytes for _, j in tiles)

    def _state(self) -> dict:
        done = self.visited[: self.step]
        kv_full = self.kinds.shape[0] * 2 * self.n * self.d * self.elem_bytes
        counts = {k: int((self.kinds == k).sum()) for k in ("skip", "partial", "full")}
        return {"kinds": self.kinds, "counts": counts, "step": self.step, "n_steps": self.n_steps,
                "current": done[-1] if done else None, "kv_bytes_loaded": self._kv_bytes(done),
                "kv_bytes_noncausal": kv_full, "kv_fraction_total": self._kv_bytes(self.visited) / kv_full}

    def readout(self) -> str:
        s = self.state
        return (f"tile {s['step']}/{s['n_steps']} visited ({s['counts']['skip']} skipped): K/V loaded "
                f"{s['kv_bytes_loaded']:,} B of {s['kv_bytes_noncausal']:,} B non-causal "
                f"(whole loop: {s['kv_fraction_total']:.0%}), d = {self.d}, {self.elem_bytes} B per element")

    def plot_args(self) -> dict:
        return {"kinds": self.kinds, "n": self.n, "block_r": self.block_r, "block_c": self.block_c,
                "upto": self.step, "title": f"N={self.n}, Br={self.block_r}, Bc={self.block_c}: "
                                            f"tile {self.step}/{self.n_steps}"}


def causal_saving_sweep(ns=(256, 512, 1024, 2048, 4096, 8192), d: int = 64, block_r: int = 128,
                        block_c: int = 64, algo: str = "flash2", device: str = "h200") -> dict:
    """flashsim.traffic, causal and not, over N (tqdm bar): {"ns", "noncausal": {"HBM bytes", "FLOPs"},
    "causal": {...}}.

    Introduced in chapter 08.
    """
    from tqdm.auto import tqdm
    out = {"ns": list(ns), "noncausal": {"HBM bytes": [], "FLOPs": []}, "causal": {"HBM bytes": [], "FLOPs": []}}
    for n in tqdm(list(ns), desc="causal vs non-causal", leave=False):
        for key, causal in (("noncausal", False), ("causal", True)):
            t = traffic(algo, n, d, block_r=block_r, block_c=block_c, causal=causal, device=device)
            out[key]["HBM bytes"].append(t.hbm_bytes)
            out[key]["FLOPs"].append(t.flops)
    return out
