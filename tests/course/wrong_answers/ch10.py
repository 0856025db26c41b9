"""Wrong answers learners write for chapter 10, each with the diagnosis its checker must give."""
import math

import numpy as np


def blocked_no_rescale(q, k, v, block=64):
    n, d = q.shape
    out = np.empty((n, d), np.float32)
    for i in range(0, n, block):
        qi = q[i:i + block] / np.float32(math.sqrt(d))
        m = np.full(qi.shape[0], -np.inf, np.float32)
        l = np.zeros(qi.shape[0], np.float32)
        acc = np.zeros((qi.shape[0], d), np.float32)
        for j in range(0, n, block):
            s = qi @ k[j:j + block].T
            m = np.maximum(m, s.max(axis=1))
            p = np.exp(s - m[:, None])
            l = l + p.sum(axis=1)
            acc = acc + p @ v[j:j + block]
        out[i:i + block] = acc / l[:, None]
    return out


def blocked_full_matrix(q, k, v, block=64):
    s = (q @ k.T) / np.float32(math.sqrt(q.shape[1]))
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v


def blocked_row_of_scores(q, k, v, block=64):
    n, d = q.shape
    out = np.empty((n, d), np.float32)
    for i in range(0, n, block):
        s = (q[i:i + block] @ k.T) / np.float32(math.sqrt(d))      # (block, N)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        out[i:i + block] = (p / p.sum(axis=1, keepdims=True)) @ v
    return out


def _dp(d):
    return -(-d // 16) * 16


CATALOGUE = [
    ("10.1", blocked_no_rescale, "missing_rescale"),
    ("10.1", blocked_full_matrix, "peak_memory_nxn"),
    ("10.1", blocked_row_of_scores, "peak_memory_row"),
    ("10.2", lambda br, bc, d: 4 * (2 * br * _dp(d) + 2 * bc * _dp(d)), "s_tile_missing"),
    ("10.2", lambda br, bc, d: 4 * (2 * br * d + 2 * bc * d + br * bc), "d_not_padded"),
    ("10.2", lambda br, bc, d: 8 * (2 * br * _dp(d) + 2 * bc * _dp(d) + br * bc), "float64_assumed"),
]


def _blocked(q, k, v, block=64, *, scale=True, normalise=True, ragged=True):
    n, d = q.shape
    out = np.zeros((n, d), np.float32)
    stop = n if ragged else n // block * block
    for i in range(0, stop, block):
        qi = q[i:i + block] / (np.float32(math.sqrt(d)) if scale else np.float32(1))
        m = np.full(qi.shape[0], -np.inf, np.float32)
        l = np.zeros(qi.shape[0], np.float32)
        acc = np.zeros((qi.shape[0], d), np.float32)
        for j in range(0, n, block):
            s = qi @ k[j:j + block].T
            m_new = np.maximum(m, s.max(axis=1))
            alpha, p = np.exp(m - m_new), np.exp(s - m_new[:, None])
            l, acc, m = alpha * l + p.sum(axis=1), alpha[:, None] * acc + p @ v[j:j + block], m_new
        out[i:i + block] = acc / l[:, None] if normalise else acc
    return out


def blocked_no_scale(q, k, v, block=64):
    return _blocked(q, k, v, block, scale=False)


def blocked_not_normalised(q, k, v, block=64):
    return _blocked(q, k, v, block, normalise=False)


def blocked_drops_ragged_rows(q, k, v, block=64):
    """range(0, n // block * block, block): the last, partial row block stays 0."""
    return _blocked(q, k, v, block, ragged=False)


CATALOGUE += [
    ("10.1", blocked_no_scale, "wrong_sm_scale"),
    ("10.1", blocked_not_normalised, "missing_normalisation"),
    ("10.1", blocked_drops_ragged_rows, "ragged_rows"),
    ("10.2", lambda br, bc, d: 4 * (br * _dp(d) + 2 * bc * _dp(d) + br * bc), "accumulator_missing"),
    ("10.2", lambda br, bc, d: 4 * (2 * br * _dp(d) + bc * _dp(d) + br * bc), "v_block_missing"),
]
