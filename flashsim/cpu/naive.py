"""Standard attention in numpy (Algorithm 0): the chapter-10 baseline that materializes the N x N scores."""
from __future__ import annotations

import math

import numpy as np

from flashsim.cpu.validate import check_qkv
from flashsim.model.attention.visibility import causal_mask


def naive_attention_numpy(q, k, v, causal=False, sm_scale=None, return_lse=False):
    """Standard attention in numpy (Algorithm 0, the chapter-10 baseline): S = q k^T is materialized, N x N.

    Same inputs and outputs as :func:`flash_attention_cpu`; works in the inputs' dtype (float32 here).
    Its extra memory is Theta(N^2) per head: the score matrix S (softmaxed in place).
    """
    check_qkv(q, k, v, name="naive_attention_numpy")
    n, d = q.shape[-2], q.shape[-1]
    scale = np.float32(1.0 / math.sqrt(d) if sm_scale is None else sm_scale)
    s = q @ np.swapaxes(k, -1, -2)
    s *= scale
    if causal:
        s[..., causal_mask(0, n, 0, n, always=True)] = -np.inf  # (N, N) True = key right of the query row
    row_max = s.max(axis=-1, keepdims=True)
    s -= row_max
    np.exp(s, out=s)
    row_sum = s.sum(axis=-1, keepdims=True)
    s /= row_sum
    out = s @ v
    if return_lse:
        return out, (row_max + np.log(row_sum))[..., 0]
    return out
