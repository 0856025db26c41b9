"""Chapter 01 dashboard: device presets side by side, and where a kernel sits on a device's roofline.

    r = RooflineDashboard(device="h200"); r.update(intensity=16.0); r.current.bound     # 'memory'
    device_table()                                                                      # the presets, a Table
"""
from __future__ import annotations

from flashsim.course import Table
from flashsim.course.ch01.figures import RooflinePlot
from flashsim.course.kit.dashboard import Dashboard, choice, log_range
from flashsim.errors import FlashsimError
from flashsim.model.hardware import PRESETS, get_device
from flashsim.model.roofline import peak_flops, roofline
from flashsim.model.simulator import traffic

__all__ = ["device_table", "attention_intensities", "RooflineDashboard"]


def device_table(names=None) -> Table:
    """The hardware presets side by side (chapter 01): SRAM per SM, SMs, L2, HBM bandwidth, peak FLOP/s, ridge point."""
    rows = []
    for name in names or list(PRESETS):
        hw = get_device(name)
        rows.append([name, hw.name, hw.sram_bytes // 1024, hw.num_sms, round(hw.sram_bytes * hw.num_sms / 2**20, 1),
                     round(hw.l2_bytes / 2**20, 1), round(hw.hbm_bandwidth_bytes_per_s / 1e12, 3),
                     round(hw.peak_matmul_flops / 1e12, 1), round(hw.peak_fp32_flops / 1e12, 1),
                     round(hw.ridge_point_flops_per_byte, 1)])
    return Table(["preset", "device", "SRAM/SM (KiB)", "SMs", "SRAM total (MiB)", "L2 (MiB)", "HBM (TB/s)",
                  "fp16 matmul (TFLOP/s)", "fp32 (TFLOP/s)", "ridge (FLOP/B)"], rows,
                 "Hardware presets (flashsim.model.hardware; each number cites its datasheet)")


def attention_intensities(n: int = 4096, d: int = 64, device: str = "h200", dtype: str = "fp16") -> dict:
    """{algo: arithmetic intensity} of standard attention ("naive") and FlashAttention ("flash2") forward, one
    head, from :func:`flashsim.traffic` (previewing chapters 02 and 05)."""
    return {algo: traffic(algo, n, d, dtype=dtype, device=device).arithmetic_intensity for algo in ("naive", "flash2")}


class RooflineDashboard(Dashboard):
    """Chapter 01: a kernel of arithmetic intensity I on a device preset: attainable FLOP/s, memory- or compute-bound.

    ``update(device=..., intensity=..., dtype=...)`` is what the dropdown and the slider call; ``current`` is
    :func:`flashsim.model.roofline.roofline` for a kernel moving 1 GB at that intensity.
    """

    DEVICES = tuple(PRESETS)
    plot = RooflinePlot

    def __init__(self, device: str = "h200", intensity: float = 16.0, dtype: str = "fp16", n: int = 4096,
                 d: int = 64):
        self.device, self.intensity, self.dtype, self.n, self.d = device, float(intensity), dtype, n, d
        self.current = None
        self._points: dict = {}
        self.update()

    def controls(self):
        return {"device": choice("device", self.DEVICES), "intensity": log_range("I (FLOP/B)", 0.1, 1e4, 0.05)}

    def apply(self, device: str | None = None, intensity: float | None = None, dtype: str | None = None):
        if device is not None:
            get_device(device)
            self.device = device
        if intensity is not None:
            if not intensity > 0:
                raise FlashsimError(f"intensity={intensity} must be > 0 FLOP/byte")
            self.intensity = float(intensity)
        if dtype is not None:
            self.dtype = dtype
        nbytes = 10 ** 9
        self.current = roofline(int(self.intensity * nbytes), nbytes, self.device, self.dtype)
        return self.current

    @property
    def attainable_flops(self) -> float:
        hw = get_device(self.device)
        return min(peak_flops(hw, self.dtype), self.intensity * hw.hbm_bandwidth_bytes_per_s)

    def readout(self) -> str:
        r = self.current
        hw = get_device(self.device)
        return (f"{hw.name}: I = {self.intensity:.3g} FLOP/B, ridge point {r.ridge_point_flops_per_byte:.0f} FLOP/B "
                f"→ <b>{r.bound}-bound</b>; attainable {self.attainable_flops / 1e12:.1f} TFLOP/s of "
                f"{peak_flops(hw, self.dtype) / 1e12:.0f}; moving 1 GB takes {r.memory_time_s * 1e6:.0f} µs, "
                f"its {self.intensity:.3g} GFLOP take {r.compute_time_s * 1e6:.0f} µs")

    def plot_args(self) -> dict:
        key = (self.n, self.d, self.device, self.dtype)
        if key not in self._points:   # the two attention kernels' intensities change only with the device or dtype
            self._points[key] = [(("standard attention" if a == "naive" else "FlashAttention") + f" N={self.n}", i)
                                 for a, i in attention_intensities(self.n, self.d, self.device, self.dtype).items()]
        return {"devices": self.DEVICES, "dtype": self.dtype, "highlight": self.device,
                "points": self._points[key], "intensity": self.intensity}
