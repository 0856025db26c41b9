"""Hardware presets: the numbers of the memory hierarchy the simulator runs on (chapter 01).

Every figure cites where it comes from. "SRAM" is the shared memory one SM (one thread block) may use; the
simulator checks tile sets against it. HBM bandwidth and peak FLOP/s feed the roofline time model in
:mod:`flashsim.model.attention.closed_forms`.

>>> h = get_device("h200", sram_bytes=100 * 1024)   # any field can be overridden
>>> h.sram_bytes
102400
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

from flashsim.errors import FlashsimError

KiB = 1024
MiB = 1024 * KiB


@dataclass(frozen=True)
class Hardware:
    """One device's memory hierarchy and compute peaks. All sizes in bytes, rates per second."""

    name: str
    sram_bytes: int  # usable shared memory (SRAM) per SM, i.e. per thread block
    num_sms: int  # streaming multiprocessors (CPU: cores)
    l2_bytes: int  # last-level cache shared by all SMs
    hbm_bandwidth_bytes_per_s: float  # DRAM (HBM/GDDR) bandwidth
    peak_matmul_flops: float  # dense fp16/bf16 tensor-core FLOP/s (fp32 accumulate)
    peak_fp32_flops: float  # non-tensor fp32 FLOP/s
    source: str = ""  # where the numbers come from

    def replace(self, **overrides) -> "Hardware":
        """A copy with some fields overridden; unknown fields raise an error naming the valid ones."""
        fields = {f.name for f in dataclasses.fields(self)}
        unknown = set(overrides) - fields
        if unknown:
            raise FlashsimError(f"unknown hardware field(s) {sorted(unknown)}: use one of {sorted(fields)}")
        for key, value in overrides.items():
            if key not in ("name", "source") and (value is None or value <= 0):
                raise FlashsimError(f"{key}={value!r} must be a positive number")
        return dataclasses.replace(self, **overrides)

    @property
    def ridge_point_flops_per_byte(self) -> float:
        """Arithmetic intensity (FLOP/byte) above which a tensor-core kernel is compute-bound (chapter 01)."""
        return self.peak_matmul_flops / self.hbm_bandwidth_bytes_per_s


# --- GPU presets -------------------------------------------------------------------------------------------
PRESETS: dict[str, Hardware] = {
    # NVIDIA A100 Tensor Core GPU datasheet (40GB SXM): 1,555 GB/s, 312 TFLOP/s fp16 dense, 19.5 TFLOP/s fp32.
    # NVIDIA A100 whitepaper (GA100): 108 SMs, 192 KB L1/shared per SM of which up to 164 KB shared, 40 MB L2.
    "a100": Hardware("A100-SXM4-40GB", sram_bytes=164 * KiB, num_sms=108, l2_bytes=40 * MiB,
                     hbm_bandwidth_bytes_per_s=1.555e12, peak_matmul_flops=312e12, peak_fp32_flops=19.5e12,
                     source="NVIDIA A100 datasheet and GA100 whitepaper"),
    # NVIDIA H100 datasheet (SXM5): 3.35 TB/s, 989 TFLOP/s fp16 dense (1,979 with sparsity), 67 TFLOP/s fp32.
    # NVIDIA H100 whitepaper (GH100): 132 SMs, 256 KB L1/shared per SM of which up to 228 KB shared, 50 MB L2.
    "h100": Hardware("H100-SXM5-80GB", sram_bytes=228 * KiB, num_sms=132, l2_bytes=50 * MiB,
                     hbm_bandwidth_bytes_per_s=3.35e12, peak_matmul_flops=989e12, peak_fp32_flops=67e12,
                     source="NVIDIA H100 datasheet and GH100 whitepaper"),
    # NVIDIA H200 datasheet (SXM): 4.8 TB/s HBM3e, 989 TFLOP/s fp16 dense, 67 TFLOP/s fp32; same GH100 SM as H100
    # (132 SMs, 228 KB shared per SM). L2: 60 MB as torch.cuda.get_device_properties reports it on an H200;
    # measured there: ~4.3 TB/s copy bandwidth, ~790 TFLOP/s bf16 matmul.
    "h200": Hardware("H200-SXM-141GB", sram_bytes=228 * KiB, num_sms=132, l2_bytes=60 * MiB,
                     hbm_bandwidth_bytes_per_s=4.8e12, peak_matmul_flops=989e12, peak_fp32_flops=67e12,
                     source="NVIDIA H200 datasheet; L2 size read by torch on an H200"),
    # NVIDIA Ada Lovelace (AD102) whitepaper, RTX 4090: 128 SMs, 128 KB L1/shared per SM (up to 100 KB shared),
    # 72 MB L2, 1,008 GB/s GDDR6X, 165.2 TFLOP/s fp16 tensor with fp32 accumulate (dense), 82.6 TFLOP/s fp32.
    "rtx4090": Hardware("GeForce RTX 4090", sram_bytes=100 * KiB, num_sms=128, l2_bytes=72 * MiB,
                        hbm_bandwidth_bytes_per_s=1.008e12, peak_matmul_flops=165.2e12, peak_fp32_flops=82.6e12,
                        source="NVIDIA Ada Lovelace (AD102) whitepaper"),
    # NVIDIA T4 datasheet: 320 GB/s GDDR6, 65 TFLOP/s fp16 mixed precision, 8.1 TFLOP/s fp32.
    # Turing (TU104) whitepaper: 40 SMs, 64 KB shared per SM, 4 MB L2.
    "t4": Hardware("Tesla T4", sram_bytes=64 * KiB, num_sms=40, l2_bytes=4 * MiB,
                   hbm_bandwidth_bytes_per_s=320e9, peak_matmul_flops=65e12, peak_fp32_flops=8.1e12,
                   source="NVIDIA T4 datasheet and Turing whitepaper"),
}

_ALIASES = {"a100-40gb": "a100", "a100-sxm": "a100", "h100-sxm": "h100", "h100-sxm5": "h100", "4090": "rtx4090",
            "rtx-4090": "rtx4090", "h200-sxm": "h200"}


def _read_cache_bytes(level: int, kind: str = "Data") -> int | None:
    """Size of the CPU cache at `level` from Linux sysfs (cpu0), or None when it cannot be read."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in sorted(os.listdir(base)):
            path = os.path.join(base, entry)
            if not entry.startswith("index"):
                continue
            with open(os.path.join(path, "level")) as f:
                if int(f.read()) != level:
                    continue
            with open(os.path.join(path, "type")) as f:
                if f.read().strip() not in (kind, "Unified"):
                    continue
            with open(os.path.join(path, "size")) as f:
                text = f.read().strip().upper()
            scale = {"K": KiB, "M": MiB, "G": 1024 * MiB}.get(text[-1], 1)
            return int(text.rstrip("KMG")) * scale
    except (OSError, ValueError):
        return None
    return None


def cpu_preset() -> Hardware:
    """This machine's CPU as a device: L2 per core plays SRAM, the last-level cache plays L2 (chapter 10).

    Cache sizes are read from sysfs; where they cannot be read (macOS, containers) the fallbacks are 1 MiB L2 and
    32 MiB L3. Bandwidth and FLOP/s are nominal (~20 GB/s per core of DRAM bandwidth, 32 fp32 FLOP/cycle/core at
    3 GHz, i.e. two AVX2 FMA pipes): chapter 10 measures the real ones.
    """
    cores = os.cpu_count() or 1
    l2 = _read_cache_bytes(2) or 1 * MiB
    llc = _read_cache_bytes(3) or 32 * MiB
    fp32 = cores * 32 * 3.0e9
    return Hardware(f"CPU ({cores} cores)", sram_bytes=l2, num_sms=cores, l2_bytes=llc,
                    hbm_bandwidth_bytes_per_s=20e9 * cores, peak_matmul_flops=fp32, peak_fp32_flops=fp32,
                    source="caches read from /sys/devices/system/cpu; bandwidth and FLOP/s nominal")


def device_names() -> list[str]:
    """Names accepted by :func:`get_device`."""
    return sorted(PRESETS) + ["cpu"]


#: device memory (HBM/GDDR) of the GPU presets, from the same datasheets as the presets above: A100 SXM4 40 GB,
#: H100 SXM5 80 GB, H200 SXM 141 GB, RTX 4090 24 GB, T4 16 GB (chapters 01 and 06)
HBM_CAPACITY_BYTES = {"a100": 40e9, "h100": 80e9, "h200": 141e9, "rtx4090": 24e9, "t4": 16e9}


def get_device(device="h200", **overrides) -> Hardware:
    """A preset by name ("a100", "h100", "h200", "rtx4090", "t4", "cpu") or a Hardware, with fields overridden.

    >>> get_device("a100").num_sms
    108
    """
    if isinstance(device, Hardware):
        hw = device
    else:
        key = str(device).lower().replace("_", "-")
        key = _ALIASES.get(key, key)
        if key == "cpu":
            hw = cpu_preset()
        elif key in PRESETS:
            hw = PRESETS[key]
        else:
            raise FlashsimError(f"unknown device {device!r}: use one of {device_names()}")
    overrides = {k: v for k, v in overrides.items() if v is not None}
    return hw.replace(**overrides) if overrides else hw


# --- the preset of the GPU a measurement runs on (predictions follow the GPU) -----------------------------------

#: GPU names as CUDA reports them (``torch.cuda.get_device_properties(i).name``, lower case, "nvidia "/"tesla "/
#: "geforce " dropped) -> preset: the first pattern found in the name wins
_CUDA_NAME_PATTERNS = (("h200", "h200"), ("h100", "h100"), ("a100", "a100"), ("rtx 4090", "rtx4090"), ("t4", "t4"))
#: the preset whose rates (bandwidth, FLOP/s) an unknown GPU borrows, by compute capability major version
_RATES_BY_MAJOR = {7: "t4", 8: "a100", 9: "h100"}


def _known_preset_key(name: str) -> str | None:
    words = " ".join(w for w in str(name).lower().replace("-", " ").split() if w not in ("nvidia", "tesla", "geforce"))
    for pattern, key in _CUDA_NAME_PATTERNS:
        if f" {pattern} " in f" {words} ":
            return key
    return None


def preset_from_properties(name: str, multiprocessors: int, l2_bytes: int, smem_per_block_bytes: int,
                           memory_bandwidth_bytes_per_s: float | None = None,
                           compute_capability: tuple[int, int] | None = None) -> Hardware:
    """The Hardware a GPU with these properties is simulated as (what ``torch.cuda.get_device_properties`` says).

    A known name ("Tesla T4", "NVIDIA H200", "NVIDIA A100-SXM4-40GB", ...) gives its preset unchanged, so that
    predictions on that GPU are the ones the course shows. An unknown GPU gets a preset built from its own
    properties: SMs, L2 and shared memory per block (SRAM) as given, DRAM bandwidth as given (else borrowed), and
    FLOP/s borrowed from the preset of its generation (compute capability 7 -> t4, 8 -> a100, 9 and later -> h100).
    Its ``source`` starts with "built from the device's properties" and says what was borrowed: the one-line notice
    :func:`flashsim.measure.device.device_hardware` prints.
    """
    key = _known_preset_key(name)
    if key is not None:
        return PRESETS[key]
    major = compute_capability[0] if compute_capability else 9
    borrowed = _RATES_BY_MAJOR.get(major, "t4" if major < 7 else "h100")
    rates = PRESETS[borrowed]
    bandwidth = memory_bandwidth_bytes_per_s or rates.hbm_bandwidth_bytes_per_s
    lent = "FLOP/s" + ("" if memory_bandwidth_bytes_per_s else " and DRAM bandwidth")
    hw = Hardware(str(name), sram_bytes=int(smem_per_block_bytes), num_sms=int(multiprocessors),
                  l2_bytes=int(l2_bytes), hbm_bandwidth_bytes_per_s=float(bandwidth),
                  peak_matmul_flops=rates.peak_matmul_flops, peak_fp32_flops=rates.peak_fp32_flops,
                  source=f"built from the device's properties ({int(multiprocessors)} SMs, "
                         f"{int(l2_bytes) / MiB:.0f} MiB L2, {int(smem_per_block_bytes) / KiB:.0f} KiB shared memory "
                         f"per block); {lent} of the {borrowed} preset")
    for field_name in ("sram_bytes", "num_sms", "l2_bytes"):
        if getattr(hw, field_name) <= 0:
            raise FlashsimError(f"GPU {name!r}: {field_name}={getattr(hw, field_name)} must be positive")
    return hw
