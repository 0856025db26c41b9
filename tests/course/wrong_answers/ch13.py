"""Wrong answers learners write for chapter 13, each with the diagnosis its checker must give."""
import numpy as np


def combine_mean(o_parts, lse_parts):
    """Averages the partial outputs: right only when every chunk has the same softmax mass."""
    return np.asarray(o_parts, np.float64).mean(axis=0), np.asarray(lse_parts, np.float64).max(axis=0)


def combine_no_max(o_parts, lse_parts):
    """Right formula without the max: e^(L_s) overflows once the logsumexps are large."""
    o_parts, lse_parts = np.asarray(o_parts, np.float64), np.asarray(lse_parts, np.float64)
    w = np.exp(lse_parts)
    return (w[:, :, None] * o_parts).sum(axis=0) / w.sum(axis=0)[:, None], np.log(w.sum(axis=0))


def combine_lse_max(o_parts, lse_parts):
    """Right output, but the logsumexp is the largest chunk's."""
    o_parts, lse_parts = np.asarray(o_parts, np.float64), np.asarray(lse_parts, np.float64)
    m = lse_parts.max(axis=0)
    w = np.exp(lse_parts - m)
    return (w[:, :, None] * o_parts).sum(axis=0) / w.sum(axis=0)[:, None], m


def _msg(n, d, p, h, b):
    return 2 * h * (n // p) * d * b


def _ring(n, d, p, h, b, causal):
    return [(r + 1) * _msg(n, d, p, h, b) if r < p - 1 else 0 for r in range(p)] if causal else \
        [(p - 1) * _msg(n, d, p, h, b)] * p


CATALOGUE = [
    ("13.1", combine_mean, "equal_weights"),
    ("13.1", combine_no_max, "overflow"),
    ("13.1", combine_lse_max, "lse_wrong"),
    ("13.2", lambda n, d, p, h, b, c: [(p - 1) * _msg(n, d, p, h, b)] * p, "causal_ignored"),
    ("13.2", lambda n, d, p, h, b, c: _ring(n, d, p, h, b, c) if c else [p * _msg(n, d, p, h, b)] * p, "p_messages"),
    ("13.2", lambda n, d, p, h, b, c: _ring(n, d, p, 1, b, c), "one_head"),
    ("13.3", lambda f, w, b: f / w, "f_over_w"),
    ("13.3", lambda f, w, b: 2 * w / (b * f), "inverted"),
    ("13.3", lambda f, w, b: b * f / w, "one_matmul_or_one_tensor"),
]


def combine_unnormalised(o_parts, lse_parts):
    o_parts, lse_parts = np.asarray(o_parts, np.float64), np.asarray(lse_parts, np.float64)
    m = lse_parts.max(axis=0)
    w = np.exp(lse_parts - m)
    return (w[:, :, None] * o_parts).sum(axis=0), m + np.log(w.sum(axis=0))


def combine_linear_weights(o_parts, lse_parts):
    """Weights proportional to L_s, as if the logsumexp were the mass itself."""
    o_parts, lse_parts = np.asarray(o_parts, np.float64), np.asarray(lse_parts, np.float64)
    o = (lse_parts[:, :, None] * o_parts).sum(axis=0) / lse_parts.sum(axis=0)[:, None]
    m = lse_parts.max(axis=0)
    return o, m + np.log(np.exp(lse_parts - m).sum(axis=0))


CATALOGUE += [
    ("13.1", combine_unnormalised, "missing_normalisation"),
    ("13.1", combine_linear_weights, "linear_weights"),
    ("13.2", lambda n, d, p, h, b, c: [x * p for x in _ring(n, d, p, h, b, c)], "whole_sequence_blocks"),
    ("13.2", lambda n, d, p, h, b, c: [x // 2 for x in _ring(n, d, p, h, b, c)], "k_only"),
    ("13.3", lambda f, w, b: b * f / (4 * w), "v_forgotten"),
    ("13.3", lambda f, w, b: f / (2 * w), "elem_bytes_missing"),
]
