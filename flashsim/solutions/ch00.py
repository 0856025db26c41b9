"""Solutions of chapter 00's exercises (Start here)."""
from __future__ import annotations

import math

from flashsim.model.dtypes import dtype_bytes
from flashsim.model.hardware import get_device

__all__ = ["tensor_bytes", "transfer_time"]

#: exercise id -> the functions that solve it (what flashsim.exercises.reveal shows)
SOLUTIONS = {"00.1": ("tensor_bytes",), "00.2": ("transfer_time",)}


def tensor_bytes(shape, dtype) -> int:
    """Exercise 00.1: elements × bytes per element."""
    return math.prod(shape) * dtype_bytes(dtype)


def transfer_time(nbytes, device) -> float:
    """Exercise 00.2: bytes ÷ HBM bandwidth (bytes per second) of the preset."""
    return nbytes / get_device(device).hbm_bandwidth_bytes_per_s
