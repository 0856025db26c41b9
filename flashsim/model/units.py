"""Numbers a person reads: bytes in binary units (B, KiB, MiB, GiB, TiB) and times in s, ms, µs, ns.

One family each, everywhere the package prints (the CLI, ``Traffic``'s repr and table, the chapters' readouts):
a KiB is 1024 bytes, so 228 KiB of SRAM and a 128 MiB score matrix read as the hardware and the course state them.

>>> format_bytes(134_217_728), format_bytes(233_472), format_bytes(100)
('128 MiB', '228 KiB', '100 B')
>>> format_seconds(6.848e-05), format_seconds(0.0123), format_seconds(2.5)
('68.5 µs', '12.3 ms', '2.5 s')
"""
from __future__ import annotations

import math

__all__ = ["byte_unit", "format_bytes", "format_seconds"]

_BYTE_UNITS = (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))
_TIME_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))


def byte_unit(nbytes: float) -> tuple[str, int]:
    """The largest binary unit ``nbytes`` reaches and its size, ("B", 1) below a KiB: the scale of an axis in bytes.

    >>> byte_unit(3 * 2**30), byte_unit(100)
    (('GiB', 1073741824), ('B', 1))
    """
    return next(((unit, size) for unit, size in _BYTE_UNITS if abs(nbytes) >= size), ("B", 1))


def format_bytes(nbytes: float, digits: int = 3) -> str:
    """``nbytes`` in the largest binary unit it reaches, to ``digits`` significant digits; "—" for None/NaN."""
    if nbytes is None or (isinstance(nbytes, float) and not math.isfinite(nbytes)):
        return "—"
    unit, size = byte_unit(nbytes)
    return f"{nbytes:.0f} B" if size == 1 else f"{nbytes / size:.{digits}g} {unit}"


def format_seconds(seconds: float, digits: int = 3) -> str:
    """``seconds`` in the largest of s, ms, µs, ns it reaches, to ``digits`` significant digits; "—" for None/NaN."""
    if seconds is None or not math.isfinite(seconds):
        return "—"
    for unit, size in _TIME_UNITS:
        if abs(seconds) >= size:
            return f"{seconds / size:.{digits}g} {unit}"
    return f"{seconds / 1e-9:.{digits}g} ns"
