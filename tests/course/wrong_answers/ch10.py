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
    ("10.2", lambda br, bc, d: 4 * (2 * br * _dp(d) + 2 * bc * _dp(d)), "too_small"),      # the S tile left out
    ("10.2", lambda br, bc, d: 4 * (2 * br * d + 2 * bc * d + br * bc), "d_not_padded"),
    ("10.2", lambda br, bc, d: 8 * (2 * br * _dp(d) + 2 * bc * _dp(d) + br * bc), "too_large"),  # float64
]
