"""Chapter 04: the state of the online softmax after each block of one row of scores (shared by the stepper
dashboard and the ``make figures`` figure)."""
from __future__ import annotations

import math

import numpy as np

from flashsim.model.attention.online_softmax import one_shot_softmax_stats, online_softmax_blocks

__all__ = ["ROWS", "online_softmax_state"]

#: the rows the stepper offers
ROWS = {
    "worked example [1, 3] then [2, 5]": [1.0, 3.0, 2.0, 5.0],
    "max grows in every block": [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
    "max in the first block": [9.0, 2.0, 1.0, 3.0, 0.5, 2.5, 1.5, 0.0],
    "random scores (16)": [round(float(x), 2) for x in np.random.default_rng(4).normal(0, 2, 16)],
}


def online_softmax_state(scores, block: int, step: int, rescale: bool = True, steps=None) -> dict:
    """After block `step` of `scores` read `block` at a time: the running m and l, this block's own (m̃, l̃), the
    old l and the factor e^(m_old − m_new) it is rescaled by, and the one-shot (m, l) the end must equal.
    ``steps`` (the list of online_softmax_blocks) may be passed in when already computed."""
    steps = steps if steps is not None else list(online_softmax_blocks(scores, block, rescale=rescale))
    cur = steps[step]
    prev_m = steps[step - 1].m if step else -math.inf
    prev_l = steps[step - 1].l if step else 0.0
    factor = math.exp(prev_m - cur.m) if prev_m != -math.inf else 0.0
    exact = one_shot_softmax_stats(scores)
    # l over every block size the stepper offers: the plot's axis then stays put when the block size moves
    all_l = [s.l for blk in range(1, 9) for s in online_softmax_blocks(scores, blk, rescale=rescale)] + [exact.l]
    return {"scores": list(scores), "block": block, "step": step, "n_blocks": len(steps),
            "m": cur.m, "l": cur.l, "block_m": cur.block_m, "block_l": cur.block_l, "prev_m": prev_m,
            "prev_l": prev_l, "rescale_factor": factor, "rescale": rescale, "exact_m": exact.m,
            "exact_l": exact.l, "history": [(s.m, s.l) for s in steps[: step + 1]],
            "l_range": (min(all_l), max(all_l))}
