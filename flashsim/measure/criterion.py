"""When a launch's predicted DRAM bytes count as right: the criterion, in one place.

A launch's DRAM prediction is within the criterion when, for reads and for writes separately,

    |simulated − measured| ≤ max(5 % of that direction's measured bytes,
                                 1 % of the launch's measured DRAM bytes in both directions,
                                 ncu's own run-to-run spread for that launch, where it was measured)

The second term keeps a near-empty direction of a large launch (0.06 MiB written beside 1 GiB read) from being
judged on bytes that are noise next to what the launch moves; the third keeps a prediction from being asked to be
closer than the measurement repeats. Beside it every report gives the strict reading: within 5 % of each
direction's measured bytes, nothing else (:func:`strict_ok`).

Used by the fidelity benchmark (benchmarks/fidelity_bench), the Gluon kernels' comparison (benchmarks/gluon_io)
and the course's text (chapter 09). Plain Python: no torch, no numpy.
"""
from __future__ import annotations

from flashsim.errors import FlashsimError

#: of that direction's measured bytes
DIRECTION_REL = 0.05
#: of the launch's measured DRAM bytes, reads and writes together
LAUNCH_REL = 0.01
#: the strict reading: of that direction's measured bytes, alone
STRICT_REL = 0.05

#: the criterion in one sentence, for reports
TEXT = ("|simulated − measured| ≤ max(5 % of that direction's measured bytes, 1 % of the launch's measured DRAM "
        "bytes in both directions, ncu's run-to-run spread for that launch where it was measured), reads and "
        "writes separately")
#: the strict reading in one sentence
STRICT_TEXT = "|simulated − measured| ≤ 5 % of that direction's measured bytes, reads and writes separately"


def _bytes(name: str, value, signed: bool = False) -> float:
    """``value`` as a byte count; ``signed``: a measurement derived by subtraction (a write-back measurement's
    writes: the flushes' own writes taken off) may fall below zero by its resolution, and counts as measured."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise FlashsimError(f"{name}={value!r}: a byte count must be a number") from None
    if x != x or x in (float("inf"), float("-inf")) or (x < 0 and not signed):
        raise FlashsimError(f"{name}={value!r}: a byte count must be a finite number"
                            + ("" if signed else " >= 0") + " (a NaN, infinite or negative count is a failed "
                            "measurement or prediction: measure again)")
    return x


def tolerance_bytes(measured: float, launch_measured: float, spread: float | None = None) -> float:
    """The largest |simulated − measured| the criterion accepts for one direction: ``measured`` (that direction's
    bytes), ``launch_measured`` (the launch's reads + writes), ``spread`` (ncu's run-to-run spread of that
    direction for this launch, largest less smallest of its repeats; None where it was measured once)."""
    measured, launch_measured = _bytes("measured", measured, True), _bytes("launch_measured", launch_measured, True)
    spread = 0.0 if spread is None else _bytes("spread", spread)
    return max(DIRECTION_REL * measured, LAUNCH_REL * launch_measured, spread, 0.0)


def within(simulated: float, measured: float, launch_measured: float, spread: float | None = None) -> bool:
    """One direction of one launch within the criterion (:func:`tolerance_bytes`)."""
    simulated = _bytes("simulated", simulated)
    return abs(simulated - _bytes("measured", measured, True)) <= tolerance_bytes(measured, launch_measured, spread)


def strict_ok(simulated: float, measured: float) -> bool:
    """One direction within 5 % of its measured bytes, nothing else."""
    simulated, measured = _bytes("simulated", simulated), _bytes("measured", measured, True)
    return abs(simulated - measured) <= STRICT_REL * max(measured, 0.0)


def spread_bytes(repeats) -> float | None:
    """Largest less smallest of one direction's repeated measurements (None for fewer than two)."""
    values = [_bytes("repeat", x, True) for x in (repeats or [])]
    return max(values) - min(values) if len(values) >= 2 else None


def judge(sim_read: float, sim_write: float, meas_read: float, meas_write: float,
          read_spread: float | None = None, write_spread: float | None = None) -> dict:
    """A launch both ways: {"read_ok", "write_ok", "ok"} under the criterion, {"strict_read_ok",
    "strict_write_ok", "strict_ok"} under the strict 5 %, and the tolerances in bytes."""
    moved = _bytes("meas_read", meas_read, True) + _bytes("meas_write", meas_write, True)
    out = {"read_ok": within(sim_read, meas_read, moved, read_spread),
           "write_ok": within(sim_write, meas_write, moved, write_spread),
           "strict_read_ok": strict_ok(sim_read, meas_read), "strict_write_ok": strict_ok(sim_write, meas_write),
           "read_tolerance_bytes": tolerance_bytes(meas_read, moved, read_spread),
           "write_tolerance_bytes": tolerance_bytes(meas_write, moved, write_spread)}
    out["ok"] = out["read_ok"] and out["write_ok"]
    out["strict_ok"] = out["strict_read_ok"] and out["strict_write_ok"]
    return out


__all__ = ["DIRECTION_REL", "LAUNCH_REL", "STRICT_REL", "TEXT", "STRICT_TEXT", "tolerance_bytes", "within",
           "strict_ok", "spread_bytes", "judge"]
