"""Chapter 01 exercises: arithmetic intensity, memory- vs compute-bound, the roofline time."""
from __future__ import annotations

from typing import Callable

from flashsim.model.dtypes import dtype_bytes
from flashsim.model.hardware import get_device
from flashsim.model.roofline import roofline
from flashsim.course.ch00.checks import Verdict, run_cases

__all__ = ["check_matmul_intensity", "check_which_bound", "check_min_kernel_time"]


def _intensity_ref(m, n, k, dtype) -> float:
    return 2 * m * n * k / ((m * k + k * n + m * n) * dtype_bytes(dtype))


def check_matmul_intensity(fn: Callable, quiet: bool = False) -> Verdict:
    """Exercise 01.1: ``fn(m, n, k, dtype) -> FLOP/byte`` of C = A B, A (m, k), B (k, n), each of A and B read
    once from HBM and C written once, 2 FLOPs per multiply-add."""
    cases = [(4096, 4096, 4096, "fp16"), (1024, 1024, 64, "fp16"), (8192, 64, 8192, "fp32"), (1, 4096, 4096, "bf16")]
    return run_cases("check_matmul_intensity", fn, cases, _intensity_ref, rel=1e-9,
                     header=("m, n, k, dtype", "expected FLOP/B", "your FLOP/B"),
                     hint="FLOPs = 2·m·n·k; bytes = (m·k + k·n + m·n)·b: A and B read, C written", quiet=quiet)


def _which_bound_ref(intensity, device) -> str:
    return "compute" if intensity >= get_device(device).ridge_point_flops_per_byte else "memory"


def check_which_bound(fn: Callable, quiet: bool = False) -> Verdict:
    """Exercise 01.2: ``fn(intensity, device) -> "memory" or "compute"`` for an fp16 matmul-like kernel, by
    comparing the intensity with the preset's ridge point (peak fp16 matmul FLOP/s ÷ HBM bandwidth)."""
    cases = [(16.0, "h200"), (500.0, "h200"), (150.0, "a100"), (250.0, "a100"), (1.0, "t4"), (1000.0, "t4"),
             (206.0, "h200")]
    return run_cases("check_which_bound", fn, cases, _which_bound_ref, header=("I, device", "expected", "yours"),
                     hint="ridge = get_device(device).ridge_point_flops_per_byte; at or above it: compute-bound",
                     quiet=quiet)


def _min_time_ref(flops, nbytes, device) -> float:
    return roofline(flops, nbytes, device, "fp16").time_s


def check_min_kernel_time(fn: Callable, quiet: bool = False) -> Verdict:
    """Exercise 01.3: ``fn(flops, nbytes, device) -> seconds``: the roofline time of an fp16 kernel, assuming
    loads and math overlap perfectly: the larger of the memory time and the compute time."""
    cases = [(4 * 4096 ** 2 * 64, (3 * 4096 * 64 + 2 * 4096 ** 2) * 2 + (2 * 4096 ** 2 + 4096 * 64) * 2, "h200"),
             (2 * 4096 ** 3, 3 * 4096 ** 2 * 2, "h200"), (10 ** 12, 10 ** 9, "a100"), (10 ** 9, 10 ** 9, "t4")]
    return run_cases("check_min_kernel_time", fn, cases, _min_time_ref, rel=1e-9,
                     header=("FLOPs, bytes, device", "expected s", "your s"),
                     hint="max(bytes / hbm_bandwidth_bytes_per_s, flops / peak_matmul_flops)", quiet=quiet)
