"""Solutions of chapter 01's exercises (The memory hierarchy)."""
from __future__ import annotations

from flashsim.model.dtypes import dtype_bytes
from flashsim.model.hardware import get_device

__all__ = ["matmul_intensity", "which_bound", "min_kernel_time"]

#: exercise id -> the functions that solve it (what flashsim.exercises.reveal shows)
SOLUTIONS = {"01.1": ("matmul_intensity",), "01.2": ("which_bound",), "01.3": ("min_kernel_time",)}


def matmul_intensity(m, n, k, dtype) -> float:
    """Exercise 01.1: 2mnk FLOPs over (mk + kn + mn)·b bytes."""
    return 2 * m * n * k / ((m * k + k * n + m * n) * dtype_bytes(dtype))


def which_bound(intensity, device) -> str:
    """Exercise 01.2: compute-bound at or above the ridge point, memory-bound below it."""
    return "compute" if intensity >= get_device(device).ridge_point_flops_per_byte else "memory"


def min_kernel_time(flops, nbytes, device) -> float:
    """Exercise 01.3: the slower of moving the bytes and doing the math."""
    hw = get_device(device)
    return max(nbytes / hw.hbm_bandwidth_bytes_per_s, flops / hw.peak_matmul_flops)
