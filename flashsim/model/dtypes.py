"""Storage dtypes and their rounding, emulated in numpy (chapter 01).

Storage is fp32, fp16 or bf16; arithmetic always accumulates in fp32. ``round_to(x, "bf16")`` emulates
bf16 storage by rounding the fp32 bit pattern to the nearest even 16-bit mantissa, so numpy (which has no
bf16) still produces the numbers a bf16 tensor would hold.
"""
from __future__ import annotations

import numpy as np

from flashsim.errors import FlashsimError

#: bytes per element of each storage dtype
DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}

#: relative error one rounding to the dtype may introduce (unit roundoff)
UNIT_ROUNDOFF = {"fp32": 2.0**-24, "fp16": 2.0**-11, "bf16": 2.0**-8}

_ALIASES = {
    "float32": "fp32", "float": "fp32", "f32": "fp32",
    "float16": "fp16", "half": "fp16", "f16": "fp16",
    "bfloat16": "bf16",
}


def canonical_dtype(dtype) -> str:
    """Return "fp32", "fp16" or "bf16" for a dtype name, a numpy dtype or scalar type (np.float16), or a torch
    dtype; raise a clear error otherwise."""
    if isinstance(dtype, np.dtype) or isinstance(dtype, type) and issubclass(dtype, np.generic):
        dtype = np.dtype(dtype).name  # np.float16, np.dtype("float16") -> "float16"
    name = str(dtype).replace("torch.", "").lower()
    name = _ALIASES.get(name, name)
    if name not in DTYPE_BYTES:
        raise FlashsimError(f"unknown dtype {name!r}: use one of {sorted(DTYPE_BYTES)}")
    return name


def dtype_bytes(dtype) -> int:
    """Bytes per element of a storage dtype: dtype_bytes("fp16") == 2."""
    return DTYPE_BYTES[canonical_dtype(dtype)]


def round_to(x: np.ndarray, dtype) -> np.ndarray:
    """Round an array to what `dtype` storage would hold, returned as float32 (accumulation type).

    fp16 saturates to ±inf past 65504, as the hardware does; bf16 rounds to nearest even.
    """
    name = canonical_dtype(dtype)
    x = np.asarray(x, dtype=np.float32)
    if name == "fp32":
        return x.copy()
    if name == "fp16":
        with np.errstate(over="ignore"):
            return x.astype(np.float16).astype(np.float32)
    # bf16: keep the top 16 bits of the fp32 pattern, rounding to nearest even; NaN stays NaN.
    bits = x.view(np.uint32).astype(np.uint64)
    rounding_bias = 0x7FFF + ((bits >> 16) & 1)
    rounded = ((bits + rounding_bias) & 0xFFFF0000).astype(np.uint32)
    out = rounded.view(np.float32).copy()
    out[np.isnan(x)] = np.nan
    return out
