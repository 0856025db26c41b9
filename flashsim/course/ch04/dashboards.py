"""Chapter 04 dashboards: the online softmax stepped block by block, and why the max is subtracted.

    s = OnlineSoftmaxStepper(); s.update(step=1); s.state["l"]     # 1.203 after [1, 3] then [2, 5]
    o = OverflowDemo(); o.update(x_max=12.0); o.naive_l             # inf: e^12 > 65504 in fp16
"""
from __future__ import annotations

import math

import numpy as np

from flashsim.course import Table
from flashsim.errors import FlashsimError
from flashsim.course.ch00.dashboards import widget_or_figure

__all__ = ["ROWS", "OnlineSoftmaxStepper", "OverflowDemo", "merge_table"]

#: the rows the stepper offers
ROWS = {
    "worked example [1, 3] then [2, 5]": [1.0, 3.0, 2.0, 5.0],
    "max grows in every block": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
    "max in the first block": [9.0, 2.0, 1.0, 3.0, 0.5, 2.5, 1.5, 0.0],
    "random scores (16)": [round(float(x), 2) for x in np.random.default_rng(4).normal(0, 2, 16)],
}


class OnlineSoftmaxStepper:
    """One row of scores read `block` entries at a time, keeping the running max m and sum l (chapter 04).

    ``update(step=..., row=..., block=..., rescale=...)``; ``state`` holds, after block ``step``: the running m
    and l, this block's own (m̃, l̃), the rescale factor e^(m_old − m_new) applied to the old l, and the one-shot
    (m, l) the final state must equal. ``rescale=False`` is the classic bug (chapter 11): the old l is not
    rescaled when the max grows.
    """

    def __init__(self, row: str = "worked example [1, 3] then [2, 5]", block: int = 2, rescale: bool = True):
        self.row, self.block, self.rescale, self.step = row, block, rescale, 0
        self.state: dict = {}
        self.update()

    @property
    def scores(self) -> list:
        return ROWS[self.row]

    def update(self, step: int | None = None, row: str | None = None, block: int | None = None,
               rescale: bool | None = None) -> dict:
        from flashsim.model.attention.online_softmax import one_shot_softmax_stats, online_softmax_blocks
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
        cur = self.steps[self.step]
        prev_m = self.steps[self.step - 1].m if self.step else -math.inf
        factor = math.exp(prev_m - cur.m) if prev_m != -math.inf else 0.0
        exact = one_shot_softmax_stats(self.scores)
        self.state = {"scores": self.scores, "block": self.block, "step": self.step, "n_blocks": len(self.steps),
                      "m": cur.m, "l": cur.l, "block_m": cur.block_m, "block_l": cur.block_l,
                      "rescale_factor": factor, "rescale": self.rescale, "exact_m": exact.m, "exact_l": exact.l,
                      "history": [(s.m, s.l) for s in self.steps[: self.step + 1]]}
        return self.state

    @property
    def n_steps(self) -> int:
        return len(self.steps)

    def readout(self) -> str:
        s = self.state
        lo = s["step"] * self.block
        blk = self.scores[lo: lo + self.block]
        resc = (f"old l × e^(m_old − m_new) = × {s['rescale_factor']:.4f}" if s["step"] and self.rescale else
                ("<b>old l NOT rescaled (bug)</b>" if s["step"] else "first block: nothing to rescale"))
        done = s["step"] == s["n_blocks"] - 1
        final = (f" Final: l = {s['l']:.4f} vs one-shot {s['exact_l']:.4f} "
                 + ("✔" if math.isclose(s["l"], s["exact_l"], rel_tol=1e-9) else "✘ WRONG")) if done else ""
        return (f"block {s['step'] + 1}/{s['n_blocks']} {blk}: block max m̃ = {s['block_m']:g}, "
                f"running m = {s['m']:g}; {resc}; running l = {s['l']:.4f}.{final}")

    def figure(self):
        from flashsim.course.ch04.figures import plot_online_softmax
        return plot_online_softmax(self.state)

    @widget_or_figure
    def show(self):
        import ipywidgets as W
        from flashsim.course.ch05.dashboards import play_controls, png_image_widget, set_png
        text = W.HTML(self.readout())
        img = png_image_widget(self.figure())
        row = W.Dropdown(options=list(ROWS), value=self.row, description="row", layout=W.Layout(width="380px"))
        blk = W.IntSlider(value=self.block, min=1, max=8, description="block")
        res = W.Checkbox(value=self.rescale, description="rescale old l")
        box, play, slider = play_controls(self.n_steps, lambda i: redraw(step=i), description="block #",
                                       interval_ms=900, value=self.step)

        def redraw(**kw):
            self.update(**kw)
            slider.max = play.max = self.n_steps - 1   # a new row or block size changes the number of blocks
            text.value = self.readout()
            set_png(img, self.figure())

        row.observe(lambda c: (redraw(row=c["new"]), setattr(slider, "value", 0)), names="value")
        blk.observe(lambda c: (redraw(block=c["new"]), setattr(slider, "value", 0)), names="value")
        res.observe(lambda c: redraw(rescale=c["new"]), names="value")
        return W.VBox([W.HBox([row, blk, res]), box, text, img])


class OverflowDemo:
    """Softmax of a row of scores up to ``x_max`` in fp16, with and without subtracting the max (chapter 04).

    fp16's largest finite value is 65504 = e^11.09: without the max subtracted, e^x is inf for x > 11.09 and the
    softmax is NaN. ``update(x_max=...)``; ``naive_l`` (Σ e^x stored in fp16) and ``safe_l`` (Σ e^(x − m)).
    """

    def __init__(self, x_max: float = 12.0, n: int = 8, dtype: str = "fp16"):
        self.n, self.dtype, self.x_max = n, dtype, x_max
        self.update()

    def update(self, x_max: float | None = None) -> dict:
        from flashsim.model.attention.online_softmax import online_softmax_blocks
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

    def figure(self):
        from flashsim.course.ch04.figures import plot_fp16_overflow
        return plot_fp16_overflow(self.row, dtype=self.dtype)

    @widget_or_figure
    def show(self):
        import ipywidgets as W
        from flashsim.course.ch05.dashboards import png_image_widget, set_png
        text = W.HTML(self.readout())
        img = png_image_widget(self.figure())
        xs = W.FloatSlider(value=self.x_max, min=2.0, max=20.0, step=0.25, description="largest score",
                           continuous_update=False)

        def redraw(change):
            self.update(x_max=change["new"])
            text.value = self.readout()
            set_png(img, self.figure())

        xs.observe(redraw, names="value")
        return W.VBox([xs, text, img])


def merge_table(scores, block: int) -> Table:
    """Each block's own (m̃, l̃), then the blocks combined with the merge ⊕ left to right and as a balanced tree,
    next to the one-shot (m, l): all three agree because ⊕ is associative (chapter 04)."""
    from flashsim.model.attention.online_softmax import merge, one_shot_softmax_stats
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
