"""Online softmax: one row, one block at a time, and the merge that makes it parallel (chapters 04 and 11).

Softmax of a row x needs two numbers before it can normalise anything: the maximum m = max x (for numerical
safety) and the denominator l = Σ e^(x − m). Read the row in blocks and both can be kept *running*
(Milakov & Gimelshein 2018):

    m_new = max(m, max(block))
    l_new = l · e^(m − m_new) + Σ e^(block − m_new)          # rescale the old sum to the new max

So ``l`` is always the denominator *relative to the running max* (base e). The seed's worked example, scores
``[1, 3]`` then ``[2, 5]``::

    after [1, 3]:  m = 3, l = e^(1−3) + e^(3−3)              = 1.135
    after [2, 5]:  m = 5, l = 1.135·e^(3−5) + e^(2−5) + e^0  = 1.203
    one shot:      e^(1−5) + e^(3−5) + e^(2−5) + e^(5−5)      = 1.203   (the same number)

Two partial results combine with an associative, commutative merge, which is why blocks can be processed in any
order, on any SM, and why FlashAttention can split the row over tiles::

    (m_a, l_a) ⊕ (m_b, l_b) = (M, l_a·e^(m_a − M) + l_b·e^(m_b − M)),  M = max(m_a, m_b)

Two demo switches show what goes wrong without the tricks:

- ``subtract_max=False`` (chapter 04): l = Σ e^x directly. In fp16, e^x overflows to inf for x > 11.09.
- ``rescale=False`` (chapter 11, the classic bug): the old l is not multiplied by e^(m − m_new) when the max
  grows, so l comes out too large as soon as a later block raises the max.

The same two operations on whole tiles, which every tiled algorithm in the model calls:

- :func:`online_softmax_update` folds one (r, c) tile of scores and its (c, d) values into the running
  (m, l, acc) of r rows (acc = Σ e^(s − m)·v, unnormalised): FA2's inner loop, chapter 05's tile.
- :func:`merge_partials` / :func:`combine_partials` merge partial attention results that are already
  normalised, each carried with its natural-log logsumexp L = m + log l (split-KV, ring attention, flash
  decoding): O = Σ_s e^(L_s − L)·O_s with L = log Σ_s e^(L_s).

>>> [round(s.l, 3) for s in online_softmax_blocks([1, 3, 2, 5], block=2)]
[1.135, 1.203]
>>> round(one_shot_softmax_stats([1, 3, 2, 5]).l, 3)
1.203
"""
from __future__ import annotations

import math
from typing import Iterator, NamedTuple, Sequence

import numpy as np

from flashsim.model.dtypes import canonical_dtype, round_to
from flashsim.errors import FlashsimError

#: the seed's worked example (chapter 04): two blocks of scores for one query row
#: e^x = 2^(x·LOG2E) and ln x = log2(x)·LN2: the kernels run the softmax in base 2 (exp2 is one GPU instruction),
#: with LOG2E folded into the score scale, and turn their base-2 logsumexp back into natural log with LN2. The one
#: definition every layer uses (the Triton kernels through :mod:`flashsim.kernels._common`'s constexprs).
LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453

WORKED_EXAMPLE_BLOCKS = ([1.0, 3.0], [2.0, 5.0])


class SoftmaxStats(NamedTuple):
    """The running statistics of a softmax row: max m and denominator l = Σ e^(x − m)."""

    m: float
    l: float


class OnlineStep(NamedTuple):
    """State after one block: which block, its own stats (m̃, l̃), and the running (m, l)."""

    block: int
    block_m: float
    block_l: float
    m: float
    l: float


def merge(a: Sequence[float], b: Sequence[float]) -> SoftmaxStats:
    """Combine two partial softmax statistics (m_a, l_a) ⊕ (m_b, l_b); associative and commutative.

    An empty part is (-inf, 0), the identity: merge(a, (-inf, 0)) == a.

    >>> merge((3.0, 1.0), (5.0, 1.0)).m
    5.0
    """
    m_a, l_a = float(a[0]), float(a[1])
    m_b, l_b = float(b[0]), float(b[1])
    m = max(m_a, m_b)
    if m == -math.inf:  # both empty
        return SoftmaxStats(m, 0.0)
    # e^(−inf − M) = 0: an empty side contributes nothing
    return SoftmaxStats(m, l_a * math.exp(m_a - m) + l_b * math.exp(m_b - m))


def online_softmax_update(m, l, acc, s, v, *, rescale: bool = True):
    """Fold one tile into the running softmax-weighted sum of r rows; returns (m, l, acc), new arrays.

    m (r,) running max, l (r,) running denominator relative to m, acc (r, d) unnormalised Σ e^(s − m)·v; s (r, c)
    the tile's scores (masked entries −inf), v (c, d) its values. Start from m = −inf, l = 0, acc = 0; the
    output is acc / l. acc = v = None updates the statistics (m, l) only. Arithmetic in the inputs' dtype
    (float32 on chip in step mode)::

        m_new = max(m, rowmax(s));  α = e^(m − m_new)  (0 on the first tile)
        l_new = α·l + rowsum(e^(s − m_new));  acc_new = α·acc + e^(s − m_new) @ v

    A row needs one finite score before its first tile with rescale (−inf − (−inf) is NaN). rescale=False
    skips α (α = 1): chapter 11's bug, wrong as soon as a later tile raises the max.
    """
    m_new = np.maximum(m, s.max(axis=1))  # (r,)
    p = np.exp(s - m_new[:, None])  # (r, c), masked entries → 0
    alpha = np.exp(m - m_new) if rescale else np.ones_like(m_new)  # (r,) rescale of the old l and acc
    l_new = alpha * l + p.sum(axis=1)
    if acc is None:  # statistics only (a softmax pass that writes P later)
        return m_new, l_new, None
    acc_new = alpha[:, None] * acc + p @ v  # (r, d)
    return m_new, l_new, acc_new


def merge_partials(o_a, lse_a, o_b, lse_b):
    """Merge two normalised partial results (o (…, n, d), lse (…, n), natural log) of the same rows: (o, lse).

    Exact, associative and commutative; a part with lse = −inf (it saw no key) weighs 0. Float64.
    """
    return combine_partials(np.stack([np.asarray(o_a, np.float64), np.asarray(o_b, np.float64)]),
                            np.stack([np.asarray(lse_a, np.float64), np.asarray(lse_b, np.float64)]))


def combine_partials(o_parts, lse_parts):
    """Merge S normalised partial results: o_parts (S, …, n, d), lse_parts (S, …, n) → (o, lse), float64.

    L = M + log Σ_s e^(L_s − M) with M = max_s L_s, O = Σ_s e^(L_s − M)·O_s / Σ_s e^(L_s − M). Rows that no
    part saw (every L_s = −inf) come out NaN with L = −inf; an empty part's o may be anything (NaN from 0/0).
    """
    o_parts = np.asarray(o_parts, np.float64)
    lse_parts = np.asarray(lse_parts, np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        m = lse_parts.max(axis=0)
        w = np.exp(lse_parts - np.where(np.isneginf(m), 0.0, m))  # (S, …, n); a part with L = −inf weighs 0
        total = w.sum(axis=0)
        lse = np.where(np.isneginf(m), -np.inf, m + np.log(total))
        weighted = np.where(w[..., None] > 0, w[..., None] * o_parts, 0.0)  # an empty part's o (NaN) ignored
        return weighted.sum(axis=0) / total[..., None], lse


def one_shot_softmax_stats(x: Sequence[float]) -> SoftmaxStats:
    """(max x, Σ e^(x − max x)) computed in float64 over the whole row: what the online version must match."""
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return SoftmaxStats(-math.inf, 0.0)
    m = float(x.max())
    return SoftmaxStats(m, float(np.exp(x - m).sum()))


def online_softmax_blocks(x: Sequence[float], block: int, *, subtract_max: bool = True, rescale: bool = True,
                          dtype: str | None = None) -> Iterator[OnlineStep]:
    """Read row `x` `block` entries at a time; yield the running (m, l) after each block.

    dtype: None computes in float64 (the textbook numbers); "fp32", "fp16" or "bf16" rounds every stored value
        (e^x, the block sum, the running l) to that dtype, as a kernel keeping its statistics in it would.
    subtract_max: False drops the max subtraction (l = Σ e^x, m stays 0): overflows in fp16 for x > 11.09.
    rescale: False forgets to rescale the old l when the max grows: the chapter 11 bug.
    """
    block = int(block)
    if block <= 0:
        raise FlashsimError(f"block={block} must be a positive integer, e.g. block=2")
    dt = canonical_dtype(dtype) if dtype is not None else None
    x = np.asarray(x, dtype=np.float64).ravel()

    def store(value):  # what the dtype would hold (float64 when dtype is None)
        if dt is None:
            return np.float64(value)
        with np.errstate(over="ignore", invalid="ignore"):
            return np.float64(round_to(np.asarray([value], np.float32), dt)[0])

    m, l = (-math.inf if subtract_max else 0.0), 0.0
    for b, start in enumerate(range(0, x.size, block)):
        xb = x[start:start + block]  # (block,)
        if dt is not None:
            xb = round_to(xb.astype(np.float32), dt).astype(np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            if subtract_max:
                block_m = float(xb.max())
                m_new = max(m, block_m)
                exps = np.array([store(e) for e in np.exp(xb - m_new)])  # e^(x − m_new) ≤ 1, each stored
                block_l = store(float(np.array([store(e) for e in np.exp(xb - block_m)]).sum()))
                old = l * math.exp(m - m_new) if (rescale and m != -math.inf) else l
                l = store(store(old) + store(exps.sum()))
                m = m_new
            else:
                block_m = 0.0
                exps = np.array([store(e) for e in np.exp(xb)])  # e^x: inf in fp16 once x > 11.09
                block_l = store(exps.sum())
                l = store(l + block_l)
        yield OnlineStep(b, float(block_m), float(block_l), float(m), float(l))


def online_softmax(x: Sequence[float], block: int, **kwargs) -> np.ndarray:
    """Softmax of row `x` from the final online (m, l): p = e^(x − m) / l (float64, or the dtype if given)."""
    last = None
    for last in online_softmax_blocks(x, block, **kwargs):
        pass
    x = np.asarray(x, dtype=np.float64).ravel()
    if last is None:
        return x.copy()
    with np.errstate(over="ignore", invalid="ignore"):
        return np.exp(x - last.m) / last.l


def online_attention_row(scores: Sequence[float], values: np.ndarray, block: int, *, rescale: bool = True
                         ) -> Iterator[tuple[float, float, np.ndarray]]:
    """One query row of attention, online: yield (m, l, o) after each block, o = Σ e^(s − m)·v / l so far.

    values: (N, d) rows matching `scores` (N,). With rescale=False the old o and l are not rescaled when the max
    grows (chapter 11's bug): the result is wrong exactly when a later block holds a larger score.
    """
    s = np.asarray(scores, dtype=np.float64).ravel()
    v = np.asarray(values, dtype=np.float64).reshape(s.size, -1)  # (N, d)
    block = int(block)
    if block <= 0:
        raise FlashsimError(f"block={block} must be a positive integer, e.g. block=2")
    m, l = np.full(1, -np.inf), np.zeros(1)  # (1,): one row
    acc = np.zeros((1, v.shape[1]))  # (1, d) unnormalised Σ e^(s − m) v
    for start in range(0, s.size, block):
        sb, vb = s[None, start:start + block], v[start:start + block]  # (1, B), (B, d)
        with np.errstate(invalid="ignore"):  # first block: e^(−inf − m) = 0, scaling l = 0 and acc = 0
            m, l, acc = online_softmax_update(m, l, acc, sb, vb, rescale=rescale)
        yield float(m[0]), float(l[0]), acc[0] / l[0]


def worked_example() -> list[OnlineStep]:
    """The seed's example: [1, 3] then [2, 5] → l = 1.135, then 1.203 (= the one-shot denominator)."""
    x = [s for blk in WORKED_EXAMPLE_BLOCKS for s in blk]
    return list(online_softmax_blocks(x, block=len(WORKED_EXAMPLE_BLOCKS[0])))
