"""The roofline time model: is a kernel limited by HBM bytes or by FLOPs? (chapters 01 and 09)

A kernel moving ``hbm_bytes`` and doing ``flops`` on a device with bandwidth BW and peak P takes at least::

    memory_time_s  = hbm_bytes / BW
    compute_time_s = flops / P
    time_s         = max(memory_time_s, compute_time_s)      # perfect overlap of loads and math

Arithmetic intensity I = flops / hbm_bytes (FLOP per byte). The *ridge point* P / BW is the intensity where the
two times are equal: below it the kernel is **memory-bound** (faster HBM helps, more FLOP/s does not), above it
**compute-bound**. On an H200 the ridge point is 989e12 / 4.8e12 ≈ 206 FLOP/byte; standard attention at d = 64
sits near 16 FLOP/byte (memory-bound), FlashAttention near N-independent hundreds (compute-bound) — chapter 09
turns that into the predicted speedup.

What the model leaves out (stated so the comparison with measurements in chapter 10 is fair): softmax, exp and
other non-matmul work (FLOPs count matmuls only, see docs/design.md), latency and launch overheads, L2 (unless
DRAM bytes from :mod:`flashsim.model.l2` are passed in), and imperfect overlap. It is a lower bound on time.

fp16/bf16 matmuls run on tensor cores (``peak_matmul_flops``); fp32 storage is modelled at the non-tensor fp32
peak (``peak_fp32_flops``), i.e. without TF32.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from flashsim.model.dtypes import canonical_dtype
from flashsim.model.hardware import Hardware, get_device

__all__ = ["Roofline", "roofline", "peak_flops"]


@dataclass(frozen=True)
class Roofline:
    """Roofline numbers of one kernel (or one pass) on one device."""

    time_s: float
    memory_time_s: float
    compute_time_s: float
    arithmetic_intensity: float  # FLOP per HBM byte (inf when no bytes move)
    ridge_point_flops_per_byte: float
    bound: str  # "memory" or "compute"

    def as_dict(self) -> dict:
        return asdict(self)


def peak_flops(hardware: Hardware, dtype="fp16") -> float:
    """FLOP/s a matmul in `dtype` can reach: tensor-core peak for fp16/bf16, the fp32 peak for fp32."""
    return hardware.peak_fp32_flops if canonical_dtype(dtype) == "fp32" else hardware.peak_matmul_flops


def roofline(flops: int, hbm_bytes: int, hardware="h200", dtype="fp16") -> Roofline:
    """Roofline time of `flops` FLOPs and `hbm_bytes` bytes on `hardware` (a preset name or Hardware).

    >>> r = roofline(flops=2 * 4096**3, hbm_bytes=3 * 4096**2 * 2, hardware="h200")
    >>> r.bound, round(r.arithmetic_intensity)
    ('compute', 1365)
    """
    hw = get_device(hardware)
    peak = peak_flops(hw, dtype)
    memory_time_s = hbm_bytes / hw.hbm_bandwidth_bytes_per_s
    compute_time_s = flops / peak
    intensity = flops / hbm_bytes if hbm_bytes else float("inf")
    ridge = peak / hw.hbm_bandwidth_bytes_per_s
    return Roofline(max(memory_time_s, compute_time_s), memory_time_s, compute_time_s, intensity, ridge,
                    "compute" if intensity >= ridge else "memory")
