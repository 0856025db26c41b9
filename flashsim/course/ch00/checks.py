"""Chapter 00 exercises, and the verdict every checker of the course returns.

How an exercise works (chapter 00 explains it to the learner):

1. the notebook states a *reference spec* (what the function must return) and gives a *stub* to fill in;
2. a *hint* is one click away;
3. ``flashsim.exercises.check_<name>(your_function)`` runs the function on a few cases, prints a verdict (PASSED or
   what went wrong, with the first failing case) and a table of the cases (for byte-counting exercises: the bytes
   read and written, expected against yours), and returns a :class:`Verdict` that is truthy when it passed.

Checkers never raise on a wrong or unfinished answer (a stub that raises ``NotImplementedError`` is reported as
"not implemented yet"), so a notebook runs top to bottom with the stubs untouched. Solutions live in
:mod:`flashsim.solutions`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from flashsim.course import Table
from flashsim.model.dtypes import dtype_bytes
from flashsim.model.hardware import get_device

__all__ = ["Verdict", "run_cases", "check_tensor_bytes", "check_transfer_time"]


@dataclass
class Verdict:
    """The result of a checker (chapter 00; every chapter's checkers return one): truthy when passed; ``str()`` gives the verdict line and the table."""

    name: str
    passed: bool
    message: str
    table: Table | None = None
    details: dict = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.passed

    def headline(self) -> str:
        mark = "PASSED" if self.passed else "NOT YET"
        return f"{'✔' if self.passed else '✘'} {self.name}: {mark} — {self.message}"

    def __str__(self) -> str:
        return self.headline() + (f"\n{self.table}" if self.table is not None else "")

    def __repr__(self) -> str:
        return f"Verdict({self.name!r}, passed={self.passed})"

    def show(self) -> "Verdict":
        print(self)
        return self


def _close(a, b, rel: float, abs_: float = 0.0) -> bool:
    """Equal numbers or equal sequences of numbers, to rel/abs tolerance (exact for ints when rel=0)."""
    if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
        try:
            return len(a) == len(b) and all(_close(x, y, rel, abs_) for x, y in zip(a, b))
        except TypeError:
            return False
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    try:
        a, b = float(a), float(b)
    except (TypeError, ValueError):
        return False
    if math.isnan(a) or math.isnan(b):
        return False
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= max(abs_, rel * max(abs(a), abs(b)))


def _short(v) -> Any:
    if isinstance(v, float):
        return float(f"{v:.6g}")
    if isinstance(v, (tuple, list)):
        return "(" + ", ".join(f"{x:,}" if isinstance(x, int) and not isinstance(x, bool) else str(_short(x))
                               for x in v) + ")"
    return v


def run_cases(name: str, fn: Callable, cases: Sequence[tuple], expected: Callable, *, rel: float = 0.0,
              abs_tol: float = 0.0, header: Sequence[str] = ("case", "expected", "yours"),
              describe: Callable | None = None, hint: str = "", quiet: bool = False) -> Verdict:
    """Run ``fn(*case)`` and ``expected(*case)`` on each case; compare to `rel`/`abs_tol`; print and return a Verdict.

    The table has one row per case: the case (``describe(*case)`` or the arguments), the expected value, the
    learner's value and ✔/✘. Exceptions from ``fn`` are caught and reported (NotImplementedError: "not implemented
    yet"). Introduced in chapter 00; every chapter's checkers use it.
    """
    rows, first_bad, error = [], None, None
    for case in cases:
        want = expected(*case)
        try:
            got = fn(*case)
        except NotImplementedError:
            verdict = Verdict(name, False, "not implemented yet: fill in the stub (the hint says how)")
            return verdict if quiet else verdict.show()
        except Exception as exc:  # the learner's bug, reported not raised
            got, error = f"{type(exc).__name__}: {exc}", exc
        ok = error is None and _close(got, want, rel, abs_tol)
        label = describe(*case) if describe else ", ".join(map(str, case))
        rows.append([label, _short(want), _short(got), "✔" if ok else "✘"])
        if not ok and first_bad is None:
            first_bad = (label, want, got)
        error = None
    cols = list(header) + ["ok"]
    table = Table(cols, rows)
    if first_bad is None:
        verdict = Verdict(name, True, f"all {len(rows)} cases match", table)
    else:
        label, want, got = first_bad
        msg = f"for {label} expected {_short(want)}, got {_short(got)}" + (f". Hint: {hint}" if hint else "")
        verdict = Verdict(name, False, msg, table)
    return verdict if quiet else verdict.show()


# --- exercise 1: bytes of a tensor ---------------------------------------------------------------------------

def _tensor_bytes_ref(shape, dtype) -> int:
    return math.prod(shape) * dtype_bytes(dtype)


def check_tensor_bytes(fn: Callable, quiet: bool = False) -> Verdict:
    """Exercise 00.1: ``fn(shape, dtype) -> int``, the bytes a tensor of `shape` occupies in `dtype`
    ("fp32" 4 bytes, "fp16" and "bf16" 2 bytes per element)."""
    cases = [((8192, 8192), "fp16"), ((1024, 64), "fp32"), ((4, 16, 1024, 64), "bf16"), ((3,), "fp16"),
             ((1, 1), "fp32")]
    return run_cases("check_tensor_bytes", fn, cases, _tensor_bytes_ref,
                     header=("shape, dtype", "expected bytes", "your bytes"),
                     hint="number of elements × bytes per element (flashsim.model.dtypes.dtype_bytes)", quiet=quiet)


# --- exercise 2: time to move bytes over HBM ----------------------------------------------------------------

def _transfer_time_ref(nbytes, device) -> float:
    return nbytes / get_device(device).hbm_bandwidth_bytes_per_s


def check_transfer_time(fn: Callable, quiet: bool = False) -> Verdict:
    """Exercise 00.2: ``fn(nbytes, device) -> seconds`` to move `nbytes` once over the HBM of preset `device`
    (``flashsim.get_device(device).hbm_bandwidth_bytes_per_s``)."""
    cases = [(134_217_728, "h200"), (134_217_728, "a100"), (1e9, "t4"), (64 * 1024, "h100")]
    return run_cases("check_transfer_time", fn, cases, _transfer_time_ref, rel=1e-6,
                     header=("bytes, device", "expected s", "your s"),
                     hint="seconds = bytes / (bytes per second); the preset's bandwidth is already in bytes/s",
                     quiet=quiet)
