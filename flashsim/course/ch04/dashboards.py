"""Chapter 04 dashboards: the online softmax stepped block by block, and why the max is subtracted.

    s = OnlineSoftmaxStepper(); s.update(step=1); s.state["l"]     # 1.203 after [1, 3] then [2, 5]
    o = OverflowDemo(); o.update(x_max=12.0); o.naive_l             # inf: e^12 > 65504 in fp16
"""
from __future__ import annotations

import math

import numpy as np

from flashsim.course import Table
from flashsim.course.ch04.figures import OnlineSoftmaxPlot, OverflowPlot
from flashsim.course.ch04.stepping import ROWS, online_softmax_state
from flashsim.course.kit.dashboard import Dashboard, choice, float_range, int_range, toggle
from flashsim.errors import FlashsimError
from flashsim.model.attention.online_softmax import merge, one_shot_softmax_stats, online_softmax_blocks

__all__ = ["ROWS", "OnlineSoftmaxStepper", "OverflowDemo", "merge_table"]


class OnlineSoftmaxStepper(Dashboard):
    """One row of scores read `block` entries at a time, keeping the running max m and sum l (chapter 04).

    ``update(step=..., row=..., block=..., rescale=...)``; ``state`` holds, after block ``step``: the running m
    and l, this block's own (m̃, l̃), the rescale factor e^(m_old − m_new) applied to the old l, and the one-shot
    (m, l) the final state must equal. ``rescale=False`` is the classic bug (chapter 11): the old l is not
    rescaled when the max grows.
    """

    plot = OnlineSoftmaxPlot
    layout = (("row", "block", "rescale"), ("step",))

    def __init__(self, row: str = "worked example [1, 3] then [2, 5]", block: int = 2, rescale: bool = True):
        self.row, self.block, self.rescale, self.step = row, block, rescale, 0
        self.state: dict = {}
        self.update()

    def controls(self):
        return {"row": choice("row", list(ROWS), width="380px"), "block": int_range("block", 1, 8),
                "rescale": toggle("rescale old l"),
                "step": int_range("block #", 0, max(self.n_steps - 1, 0), play_ms=900, width="60%")}

    @property
    def scores(self) -> list:
        return ROWS[self.row]

    def apply(self, step: int | None = None, row: str | None = None, block: int | None = None,
              rescale: bool | None = None) -> dict:
        if row is not None:
            if row not in ROWS:
                raise FlashsimError(f"row={row!r}: use one of {list(ROWS)}")
            self.row, self.step = row, 0
        if block is not None:
            if int(block) < 1:
                raise FlashsimError(f"block={block} must be >= 1")
            self.block, self.step = int(block), 0
        if rescale is not None:
            self.rescale = bool(rescale)
        self.steps = list(online_softmax_blocks(self.scores, self.block, rescale=self.rescale))
        if step is not None:
            if not 0 <= int(step) < len(self.steps):
                raise FlashsimError(f"step={step}: this row has blocks 0..{len(self.steps) - 1}")
            self.step = int(step)
        self.step = min(self.step, len(self.steps) - 1)
        self.state = online_softmax_state(self.scores, self.block, self.step, self.rescale, steps=self.steps)
        return self.state

    @property
    def n_steps(self) -> int:
        return len(getattr(self, "steps", ())) or 1

    def readout(self) -> str:
        s = self.state
        lo = s["step"] * self.block
        blk = self.scores[lo: lo + self.block]
        resc = (f"old l × e^(m_old − m_new) = {s['prev_l']:.4f} × e^({s['prev_m']:g} − {s['m']:g}) = "
                f"{s['prev_l']:.4f} × {s['rescale_factor']:.4f} = {s['prev_l'] * s['rescale_factor']:.4f}"
                if s["step"] and self.rescale else
                ("<b>old l NOT rescaled (bug)</b>" if s["step"] else "first block: nothing to rescale"))
        done = s["step"] == s["n_blocks"] - 1
        final = (f" Final: l = {s['l']:.4f} vs one-shot {s['exact_l']:.4f} "
                 + ("✔" if math.isclose(s["l"], s["exact_l"], rel_tol=1e-9) else "✘ WRONG")) if done else ""
        return (f"block {s['step'] + 1}/{s['n_blocks']} {blk}: block max m̃ = {s['block_m']:g}, "
                f"running m = {s['m']:g}; {resc}; running l = {s['l']:.4f}.{final}")

    def plot_args(self) -> dict:
        return {"state": self.state}


class OverflowDemo(Dashboard):
    """Softmax of a row of scores up to ``x_max`` in fp16, with and without subtracting the max (chapter 04).

    fp16's largest finite value is 65504 = e^11.09: without the max subtracted, e^x is inf for x > 11.09 and the
    softmax is NaN. ``update(x_max=...)``; ``naive_l`` (Σ e^x stored in fp16) and ``safe_l`` (Σ e^(x − m)).
    """

    plot = OverflowPlot

    def __init__(self, x_max: float = 12.0, n: int = 8, dtype: str = "fp16"):
        self.n, self.dtype, self.x_max = n, dtype, x_max
        self.update()

    def controls(self):
        return {"x_max": float_range("largest score", 2.0, 20.0, 0.25, width="420px")}

    def apply(self, x_max: float | None = None) -> dict:
        if x_max is not None:
            self.x_max = float(x_max)
        self.row = list(np.linspace(self.x_max - 7.0, self.x_max, self.n))
        naive = list(online_softmax_blocks(self.row, self.n, subtract_max=False, dtype=self.dtype))[-1]
        safe = list(online_softmax_blocks(self.row, self.n, dtype=self.dtype))[-1]
        self.naive_l, self.safe_l, self.safe_m = naive.l, safe.l, safe.m
        return {"naive_l": self.naive_l, "safe_l": self.safe_l, "m": self.safe_m}

    @property
    def overflows(self) -> bool:
        return not math.isfinite(self.naive_l)

    def readout(self) -> str:
        return (f"row = {self.n} scores from {self.x_max - 7:.2f} to {self.x_max:.2f} in {self.dtype}: "
                f"Σ e^x = {self.naive_l:.6g}" + (" (overflow → softmax = inf/inf = NaN)" if self.overflows else "")
                + f"; with the max subtracted: m = {self.safe_m:.2f}, Σ e^(x − m) = {self.safe_l:.4f} (always ≤ "
                f"{self.n}, never overflows)")

    def plot_args(self) -> dict:
        return {"row": self.row, "dtype": self.dtype}


def merge_table(scores, block: int) -> Table:
    """Each block's own (m̃, l̃), then the blocks combined with the merge ⊕ left to right and as a balanced tree,
    next to the one-shot (m, l): all three agree because ⊕ is associative (chapter 04)."""
    parts = [one_shot_softmax_stats(scores[i:i + block]) for i in range(0, len(scores), block)]
    rows = [[f"block {k}: {list(scores[k * block:(k + 1) * block])}", p.m, p.l] for k, p in enumerate(parts)]
    seq = parts[0]
    for p in parts[1:]:
        seq = merge(seq, p)
    level = list(parts)
    while len(level) > 1:
        level = [merge(level[i], level[i + 1]) if i + 1 < len(level) else level[i] for i in range(0, len(level), 2)]
    exact = one_shot_softmax_stats(scores)
    rows += [["⊕ left to right", seq.m, seq.l], ["⊕ as a tree", level[0].m, level[0].l],
             ["one shot (float64)", exact.m, exact.l]]
    return Table(["", "m", "l"], rows, "Softmax statistics per block, and merged")
