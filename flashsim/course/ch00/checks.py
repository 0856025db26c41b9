"""Chapter 00 exercises, and the course's exercise doors: ``hint``, ``reveal`` and ``progress``.

Every checker of the course follows one idiom (:mod:`flashsim.course.kit.checker`): an exercise with a spec and
graded hints, one check that prints a ✔/✘ verdict with its diagnosis and table, a pass recorded in the
learner's progress. Chapter 00 introduces it; the doors below are re-exported as ``exercises.hint``,
``exercises.reveal`` and ``exercises.progress``.
"""
from __future__ import annotations

import math
from typing import Callable

from flashsim.course.kit.checker import Suspect, Verdict, check_cases, exercise, hint
from flashsim.course.kit.progress import progress
from flashsim.course.kit.reveal import reveal
from flashsim.model.dtypes import dtype_bytes
from flashsim.model.hardware import get_device

__all__ = ["Verdict", "hint", "reveal", "progress", "check_tensor_bytes", "check_transfer_time"]

TENSOR_BYTES = exercise(
    "00.1", "tensor bytes",
    "fn(shape, dtype) -> int: the bytes a tensor of this shape occupies when stored in dtype ('fp32', 'fp16', "
    "'bf16').",
    ("How many numbers does a tensor of shape (4, 16, 1024, 64) hold, and how big is one of them?",
     "flashsim.model.dtypes.dtype_bytes(dtype) gives the size of one element.",
     "Count the elements first (every dimension multiplies the count), then ask how many bytes one element of "
     "this dtype takes."),
    "check_tensor_bytes")

TRANSFER_TIME = exercise(
    "00.2", "transfer time",
    "fn(nbytes, device) -> seconds: the time to move nbytes once over the HBM of the preset device.",
    ("If a pipe carries B bytes every second, how long do n bytes take?",
     "flashsim.get_device(device).hbm_bandwidth_bytes_per_s is already in bytes per second.",
     "Divide the bytes by the bytes the memory moves each second; the preset's bandwidth is already in bytes "
     "per second."),
    "check_transfer_time")


def _tensor_bytes_ref(shape, dtype) -> int:
    return math.prod(shape) * dtype_bytes(dtype)


def check_tensor_bytes(fn: Callable, quiet: bool = False) -> Verdict:
    """Exercise 00.1 (see its spec: ``exercises.hint("00.1")``)."""
    cases = [((8192, 8192), "fp16"), ((1024, 64), "fp32"), ((4, 16, 1024, 64), "bf16"), ((3,), "fp16"),
             ((1, 1), "fp32")]
    suspects = (Suspect("elements_not_bytes", lambda s, dt: math.prod(s),
                        "your answers are the number of elements: how many bytes does each element take?"),
                Suspect("fixed_element_size", lambda s, dt: 2 * math.prod(s),
                        "your answers assume 2 bytes per element for every dtype: look at the fp32 cases"),
                Suspect("sum_not_product", lambda s, dt: sum(s) * dtype_bytes(dt),
                        "your answers add the dimensions: a (a, b) tensor holds how many numbers?"),
                Suspect("bits_not_bytes", lambda s, dt: 8 * math.prod(s) * dtype_bytes(dt),
                        "your answers are 8× too large: they count bits, and the spec asks for bytes"),
                Suspect("bf16_as_fp32", lambda s, dt: math.prod(s) * (4 if dt == "bf16" else dtype_bytes(dt)),
                        "only bf16 is wrong: bf16 is a 16-bit format, 2 bytes like fp16 (it keeps fp32's exponent, "
                        "not its size)"))
    return check_cases(TENSOR_BYTES, fn, cases, _tensor_bytes_ref, header=("shape, dtype", "expected B", "your B"),
                       suspects=suspects, quiet=quiet)


def _transfer_time_ref(nbytes, device) -> float:
    return nbytes / get_device(device).hbm_bandwidth_bytes_per_s


def check_transfer_time(fn: Callable, quiet: bool = False) -> Verdict:
    """Exercise 00.2 (see its spec: ``exercises.hint("00.2")``)."""
    cases = [(134_217_728, "h200"), (134_217_728, "a100"), (1e9, "t4"), (64 * 1024, "h100")]
    suspects = (Suspect("multiplied", lambda n, dev: n * get_device(dev).hbm_bandwidth_bytes_per_s,
                        "your answers grow with the bandwidth: a faster memory should take less time"),
                Suspect("same_device", lambda n, dev: n / get_device("h200").hbm_bandwidth_bytes_per_s,
                        "your answers are the H200's for every device: use the preset named by `device`"),
                Suspect("bits", lambda n, dev: 8 * n / get_device(dev).hbm_bandwidth_bytes_per_s,
                        "your times are 8× too long: the bandwidth is in bytes per second, and so is nbytes"),
                Suspect("milliseconds", lambda n, dev: 1e3 * n / get_device(dev).hbm_bandwidth_bytes_per_s,
                        "your times are 1000× too large: the spec asks for seconds, not milliseconds"),
                Suspect("bandwidth_in_gb", lambda n, dev: n / (get_device(dev).hbm_bandwidth_bytes_per_s / 1e9),
                        "your times are 10⁹× too large: hbm_bandwidth_bytes_per_s is already in bytes, not GB"))
    return check_cases(TRANSFER_TIME, fn, cases, _transfer_time_ref, rel=1e-6,
                       header=("bytes, device", "expected s", "your s"), suspects=suspects, quiet=quiet)
