"""Chapter 01 exercises: arithmetic intensity, memory- vs compute-bound, the roofline time."""
from __future__ import annotations

from typing import Callable

from flashsim.course.kit.checker import Suspect, Verdict, check_cases, exercise
from flashsim.model.dtypes import dtype_bytes
from flashsim.model.hardware import get_device
from flashsim.model.roofline import roofline

__all__ = ["check_matmul_intensity", "check_which_bound", "check_min_kernel_time"]

MATMUL_INTENSITY = exercise(
    "01.1", "matmul intensity",
    "fn(m, n, k, dtype) -> FLOP per byte of C = A B with A (m, k) and B (k, n) read once from HBM and C written "
    "once.",
    ("How many multiply-adds does C = A B need, and how many FLOPs is one multiply-add?",
     "Count the bytes of all three matrices that cross HBM, in the dtype's element size.",
     "FLOPs: one multiply-add for every (row of A, column of B, index along k). Bytes: three matrices of "
     "different shapes, each crossing HBM once, in the dtype's element size."),
    "check_matmul_intensity")

WHICH_BOUND = exercise(
    "01.2", "memory- or compute-bound",
    "fn(intensity, device) -> 'memory' or 'compute': which resource limits an fp16 matmul-like kernel of this "
    "arithmetic intensity on the preset.",
    ("At what intensity do the memory time and the compute time of a kernel become equal?",
     "The preset knows that crossing point: get_device(device).ridge_point_flops_per_byte.",
     "Compare the intensity with the preset's ridge point; at exactly the ridge the two times are equal, and "
     "the spec counts that as compute-bound."),
    "check_which_bound")

MIN_KERNEL_TIME = exercise(
    "01.3", "roofline time",
    "fn(flops, nbytes, device) -> seconds: the shortest time an fp16 kernel doing `flops` and moving `nbytes` can "
    "take on the preset when loads and math overlap perfectly.",
    ("If moving data and computing happen at the same time, which one decides when the kernel ends?",
     "The preset has hbm_bandwidth_bytes_per_s and peak_matmul_flops.",
     "Compute both times, the memory time from the HBM bandwidth and the compute time from the fp16 matmul "
     "peak; with perfect overlap only one of them decides."),
    "check_min_kernel_time")


def _intensity_ref(m, n, k, dtype) -> float:
    return 2 * m * n * k / ((m * k + k * n + m * n) * dtype_bytes(dtype))


def check_matmul_intensity(fn: Callable, quiet: bool = False) -> Verdict:
    """Exercise 01.1 (spec: ``exercises.hint("01.1")``)."""
    cases = [(4096, 4096, 4096, "fp16"), (1024, 1024, 64, "fp16"), (8192, 64, 8192, "fp32"), (1, 4096, 4096, "bf16")]
    suspects = (Suspect("c_not_written", lambda m, n, k, dt: 2 * m * n * k / ((m * k + k * n) * dtype_bytes(dt)),
                        "your bytes leave out one matrix: the result C is written to HBM too"),
                Suspect("elements_not_bytes", lambda m, n, k, dt: 2 * m * n * k / (m * k + k * n + m * n),
                        "your answers divide by elements, not bytes: the dtype's element size is missing"),
                Suspect("one_flop_per_mac", lambda m, n, k, dt: _intensity_ref(m, n, k, dt) / 2,
                        "your FLOPs are m·n·k: each multiply-add is 2 FLOPs"),
                Suspect("c_read_too", lambda m, n, k, dt: 2 * m * n * k / ((m * k + k * n + 2 * m * n)
                                                                           * dtype_bytes(dt)),
                        "your bytes read C as well as write it: C = A B is only written"),
                Suspect("bytes_per_flop", lambda m, n, k, dt: 1 / _intensity_ref(m, n, k, dt),
                        "your answers are bytes per FLOP: intensity is FLOPs per byte"))
    return check_cases(MATMUL_INTENSITY, fn, cases, _intensity_ref, rel=1e-9,
                       header=("m, n, k, dtype", "expected FLOP/B", "your FLOP/B"), suspects=suspects, quiet=quiet)


def _which_bound_ref(intensity, device) -> str:
    return "compute" if intensity >= get_device(device).ridge_point_flops_per_byte else "memory"


def check_which_bound(fn: Callable, quiet: bool = False) -> Verdict:
    """Exercise 01.2 (spec: ``exercises.hint("01.2")``)."""
    cases = [(16.0, "h200"), (500.0, "h200"), (150.0, "a100"), (250.0, "a100"), (1.0, "t4"), (1000.0, "t4"),
             (206.0, "h200"), (206.5, "h200"),
             (get_device("a100").ridge_point_flops_per_byte, "a100")]   # exactly at the ridge: compute
    flip = {"compute": "memory", "memory": "compute"}
    suspects = (Suspect("reversed", lambda i, dev: flip[_which_bound_ref(i, dev)],
                        "every answer is the opposite: a high intensity means many FLOPs per byte"),
                Suspect("fixed_ridge", lambda i, dev: "compute" if i >= 200 else "memory",
                        "your answers fit one ridge point for every device: each preset has its own "
                        "(206.04 FLOP/B on the H200)"),
                Suspect("strict_ridge", lambda i, dev: "compute" if i > get_device(dev).ridge_point_flops_per_byte
                        else "memory", "at exactly the ridge point both times are equal: the spec counts it as "
                        "compute-bound (>=)"),
                Suspect("always_memory", lambda i, dev: "memory", "every answer is 'memory': a kernel above the "
                        "ridge point is compute-bound"),
                Suspect("bandwidth_ratio_inverted", lambda i, dev: "compute" if i >= 1 / get_device(
                    dev).ridge_point_flops_per_byte else "memory", "your ridge point is bytes per FLOP: compare the "
                        "intensity with peak FLOP/s ÷ bandwidth"))
    threshold = _fixed_threshold(fn, cases)
    if threshold is not None:
        suspects += (Suspect("fixed_ridge", lambda i, dev: "compute" if i >= threshold else "memory",
                             f"your answers switch at one intensity (about {threshold:g} FLOP/B) for every device: "
                             "each preset has its own ridge point, peak FLOP/s ÷ bandwidth"),)
    return check_cases(WHICH_BOUND, fn, cases, _which_bound_ref, header=("I, device", "expected", "yours"),
                       suspects=suspects, quiet=quiet)


def _fixed_threshold(fn, cases) -> float | None:
    """The intensity where the learner's answers switch, when they switch at one intensity for every device."""
    try:
        got = [(i, fn(i, dev)) for i, dev in cases]
    except Exception:  # noqa: BLE001 - the checker reports the learner's exception itself
        return None
    computes = [i for i, a in got if a == "compute"]
    memories = [i for i, a in got if a == "memory"]
    if len(computes) + len(memories) != len(got) or not computes or not memories:
        return None
    return min(computes) if min(computes) > max(memories) else None


def _min_time_ref(flops, nbytes, device) -> float:
    return roofline(flops, nbytes, device, "fp16").time_s


def check_min_kernel_time(fn: Callable, quiet: bool = False) -> Verdict:
    """Exercise 01.3 (spec: ``exercises.hint("01.3")``)."""
    cases = [(4 * 4096 ** 2 * 64, (3 * 4096 * 64 + 2 * 4096 ** 2) * 2 + (2 * 4096 ** 2 + 4096 * 64) * 2, "h200"),
             (2 * 4096 ** 3, 3 * 4096 ** 2 * 2, "h200"), (10 ** 12, 10 ** 9, "a100"), (10 ** 9, 10 ** 9, "t4")]

    def mem(f, b, dev):
        return b / get_device(dev).hbm_bandwidth_bytes_per_s

    def comp(f, b, dev):
        return f / get_device(dev).peak_matmul_flops
    suspects = (Suspect("sum_not_max", lambda f, b, dev: mem(f, b, dev) + comp(f, b, dev),
                        "your answers add the two times: with perfect overlap they run at the same time"),
                Suspect("memory_only", mem, "your answers are the memory time alone: a compute-bound case is "
                        "limited by the math"),
                Suspect("compute_only", comp, "your answers are the compute time alone: a memory-bound case is "
                        "limited by the bytes"),
                Suspect("min_not_max", lambda f, b, dev: min(mem(f, b, dev), comp(f, b, dev)),
                        "your answers take the shorter of the two times: the kernel ends when the slower one does"),
                Suspect("fp32_peak", lambda f, b, dev: max(mem(f, b, dev), f / get_device(dev).peak_fp32_flops),
                        "your compute time uses the fp32 peak: the spec's kernel is fp16"))
    return check_cases(MIN_KERNEL_TIME, fn, cases, _min_time_ref, rel=1e-9,
                       header=("FLOPs, bytes, device", "expected s", "your s"), suspects=suspects, quiet=quiet)
