"""Wrong answers learners write for chapter 11, each with the diagnosis its checker must give."""
import math

import numpy as np


def _attn(q, k, v, scale, mask):
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    s = q @ k.T * scale
    if mask is not None:
        s = np.where(mask(s.shape), s, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v


def ref_no_mask(q, k, v):
    return _attn(q, k, v, 1 / math.sqrt(q.shape[1]), None)


def ref_no_scale(q, k, v):
    return _attn(q, k, v, 1.0, lambda sh: np.tril(np.ones(sh, bool)))


def ref_strict_mask(q, k, v):
    return _attn(q, k, v, 1 / math.sqrt(q.shape[1]), lambda sh: np.tril(np.ones(sh, bool), -1))


def merge_no_rescale(a, b):
    (m_a, l_a, o_a), (m_b, l_b, o_b) = a, b
    return np.maximum(m_a, m_b), l_a + l_b, (l_a[:, None] * o_a + l_b[:, None] * o_b) / (l_a + l_b)[:, None]


def merge_not_normalised(a, b):
    (m_a, l_a, o_a), (m_b, l_b, o_b) = a, b
    m = np.maximum(m_a, m_b)
    wa, wb = l_a * np.exp(m_a - m), l_b * np.exp(m_b - m)
    return m, wa + wb, wa[:, None] * o_a + wb[:, None] * o_b


def merge_nan_on_empty(a, b):
    (m_a, l_a, o_a), (m_b, l_b, o_b) = a, b
    m = np.maximum(m_a, m_b)
    wa, wb = l_a * np.exp(m_a - m), l_b * np.exp(m_b - m)
    o = wa[:, None] * o_a / (wa + wb)[:, None] + wb[:, None] * o_b / (wa + wb)[:, None]
    o = np.where(l_b[:, None] == 0, np.nan, o)            # treats an empty part as invalid
    return m, wa + wb, o


def _flops(n, d, br, bc, causal, half=False):
    total = 0
    for i0 in range(0, n, br):
        for j0 in range(0, n, bc):
            if causal and j0 > min(i0 + br, n) - 1:
                continue
            total += 4 * min(br, n - i0) * min(bc, n - j0) * d
    return total


CATALOGUE = [
    ("11.1", ref_no_mask, "causal_mask_missing"),
    ("11.1", ref_no_scale, "wrong_sm_scale"),
    ("11.1", ref_strict_mask, "diagonal_masked"),
    ("11.2", lambda n, d, br, bc, c: _flops(n, d, br, bc, c) // 2, "one_matmul_per_tile"),
    ("11.2", lambda n, d, br, bc, c: _flops(n, d, br, bc, False), "causal_ignored"),
    ("11.2", lambda n, d, br, bc, c: _flops(n, d, br, bc, False) // (2 if c else 1), "causal_exact_half"),
    ("11.3", merge_no_rescale, "missing_rescale"),
    ("11.3", merge_not_normalised, "missing_normalisation"),
    ("11.3", merge_nan_on_empty, "empty_part"),
]


def ref_softmax_over_queries(q, k, v):
    """softmax(axis=0): each key's column sums to 1 instead of each query's row."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    s = np.where(np.tril(np.ones((q.shape[0],) * 2, bool)), q @ k.T / math.sqrt(q.shape[1]), -np.inf)
    p = np.exp(s - s.max(axis=0, keepdims=True))
    return (p / p.sum(axis=0, keepdims=True)) @ v


def ref_mask_after_softmax(q, k, v):
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    s = q @ k.T / math.sqrt(q.shape[1])
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p = np.tril(p / p.sum(axis=1, keepdims=True))
    return p @ v


def merge_weights_without_l(a, b):
    (m_a, l_a, o_a), (m_b, l_b, o_b) = a, b
    m = np.maximum(m_a, m_b)
    wa, wb = np.exp(m_a - m), np.exp(m_b - m)
    return m, l_a * wa + l_b * wb, (wa[:, None] * o_a + wb[:, None] * o_b) / (wa + wb)[:, None]


def merge_l_not_rescaled(a, b):
    """o right, but l = l_a + l_b (not brought to the merged max)."""
    (m_a, l_a, o_a), (m_b, l_b, o_b) = a, b
    m = np.maximum(m_a, m_b)
    wa, wb = l_a * np.exp(m_a - m), l_b * np.exp(m_b - m)
    return m, l_a + l_b, (wa[:, None] * o_a + wb[:, None] * o_b) / (wa + wb)[:, None]


def _flops_whole_tiles(n, d, br, bc, causal):
    total = 0
    for i0 in range(0, n, br):
        for j0 in range(0, n, bc):
            if causal and j0 > min(i0 + br, n) - 1:
                continue
            total += 4 * br * bc * d
    return total


CATALOGUE += [
    ("11.1", ref_softmax_over_queries, "softmax_wrong_axis"),
    ("11.1", ref_mask_after_softmax, "masked_after_softmax"),
    ("11.2", _flops_whole_tiles, "ragged_tiles_full"),
    ("11.2", lambda n, d, br, bc, c: 4 * d * (n * (n + 1) // 2 if c else n * n), "visible_elements_only"),
    ("11.3", merge_weights_without_l, "l_ignored"),
    ("11.3", merge_l_not_rescaled, "wrong_l"),
]
