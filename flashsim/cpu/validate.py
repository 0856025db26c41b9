"""Argument checks shared by the CPU kernels: clear FlashsimErrors that name the fix."""
from __future__ import annotations

import numpy as np

from flashsim.errors import FlashsimError


def check_qkv(q, k, v, name="flash_attention_cpu"):
    arrays = {"q": q, "k": k, "v": v}
    for key, arr in arrays.items():
        if not isinstance(arr, np.ndarray):
            raise FlashsimError(f"{name}: {key} is a {type(arr).__name__}; pass a numpy array "
                                f"(for a torch tensor use {key}.numpy())")
        if arr.dtype != np.float32:
            raise FlashsimError(f"{name}: {key} has dtype {arr.dtype}; pass float32 ({key}.astype(np.float32))")
        if arr.ndim not in (2, 4):
            raise FlashsimError(f"{name}: {key} has {arr.ndim} dimensions {arr.shape}; pass (N, d) or "
                                f"(B, H, N, d)")
    if not (q.ndim == k.ndim == v.ndim):
        raise FlashsimError(f"{name}: q, k, v have shapes {q.shape}, {k.shape}, {v.shape}; give all three the "
                            f"same number of dimensions")
    if q.shape != k.shape or k.shape != v.shape:
        raise FlashsimError(f"{name}: q, k, v must have the same shape (self-attention), got {q.shape}, "
                            f"{k.shape}, {v.shape}")
    if q.shape[-2] == 0 or q.shape[-1] == 0 or q.size == 0:
        raise FlashsimError(f"{name}: empty input {q.shape}; N and d must be at least 1")


def check_block(value, name):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise FlashsimError(f"{name}={value!r} must be a positive integer, or None for default_blocks(d)")
    return int(value)
