"""The preset of the GPU this process runs on, so that predictions follow the GPU they run on.

:func:`device_hardware` reads ``torch.cuda.get_device_properties`` and hands the name, SM count, L2 size and shared
memory per block to :func:`flashsim.model.hardware.preset_from_properties`: a known GPU ("Tesla T4", "NVIDIA
H200") gets its preset, an unknown one a preset built from those properties, announced by one printed line.
"""
from __future__ import annotations

import functools

from flashsim.errors import FlashsimError
from flashsim.kernels.runtime import INSTALL_FIX
from flashsim.model.hardware import PRESETS, Hardware, get_device, preset_from_properties


def _bandwidth_bytes_per_s(props) -> float | None:
    """DRAM bandwidth from the memory clock (kHz) and bus width (bits), where torch reports them: DDR, 2 per clock."""
    clock_khz, bus_bits = getattr(props, "memory_clock_rate", 0), getattr(props, "memory_bus_width", 0)
    return 2.0 * clock_khz * 1e3 * bus_bits / 8 if clock_khz and bus_bits else None


def hardware_of(props) -> Hardware:
    """The preset for one ``torch.cuda.get_device_properties(i)`` result (any object with those attributes)."""
    smem = (getattr(props, "shared_memory_per_block_optin", 0) or getattr(props, "shared_memory_per_block", 0)
            or 48 * 1024)
    return preset_from_properties(props.name, props.multi_processor_count, getattr(props, "L2_cache_size", 0) or 1,
                                  smem, _bandwidth_bytes_per_s(props),
                                  (getattr(props, "major", 9), getattr(props, "minor", 0)))


@functools.lru_cache(maxsize=None)
def device_hardware(index: int = 0) -> Hardware:
    """The preset of CUDA GPU ``index`` (cached per process). An unknown GPU prints one line: its preset was built
    from its properties, and what was borrowed. FlashsimError without torch or without a CUDA GPU."""
    try:
        import torch                      # lazily: torch is an optional dependency
    except ImportError as exc:
        raise FlashsimError(f"reading the GPU's properties needs torch ({exc}): {INSTALL_FIX}") from exc
    if not torch.cuda.is_available():
        raise FlashsimError("no CUDA GPU: there is no device to take a preset from; pass hardware='h200' (or another "
                            "preset name) to simulate one")
    hw = hardware_of(torch.cuda.get_device_properties(index))
    if hw not in PRESETS.values():
        print(f"Unknown GPU {hw.name!r}: predictions use a preset {hw.source}.")
    return hw


def simulated_hardware(hardware=None) -> Hardware:
    """The Hardware a measurement's prediction is made for: ``hardware`` when given (a preset name or Hardware),
    else the CUDA GPU this runs on (:func:`device_hardware`), else (the interpreter, no GPU) the course's default
    preset, :func:`flashsim.model.hardware.get_device`'s."""
    if hardware is not None:
        return get_device(hardware)
    try:
        import torch                      # lazily: torch is an optional dependency
        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    return device_hardware() if has_gpu else get_device()
