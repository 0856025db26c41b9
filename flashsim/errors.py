"""Errors flashsim raises on bad input. Each message names the fix (introduced in chapter 01).

:class:`MissingExtra` and :func:`missing` live here, at the bottom of the layers, so that every layer names a
missing optional extra with the same one line: the course (:mod:`flashsim.course.kit.optional`), the kernels'
backend (:mod:`flashsim.kernels.runtime`), the CPU kernel and ring attention on real processes.
"""
from __future__ import annotations

import importlib.util
import sys


class FlashsimError(ValueError):
    """Bad input to flashsim: the message says what was wrong and how to fix it."""


class SramCapacityError(FlashsimError):
    """A tile set does not fit in the simulated SRAM (chapter 03)."""


class MemoryBudgetError(FlashsimError):
    """Step mode was asked for a size whose host memory would exceed the budget (chapter 05)."""


class FlashsimWarning(UserWarning):
    """Input flashsim accepts but whose verdict cannot be ok: NaN/inf inputs, or finite inputs that overflow the
    storage dtype (fp16 saturates past 65504)."""


class MissingExtra(FlashsimError, ImportError):
    """An optional extra of flashsim is not installed; the message says which and how to install it."""


#: extra (as in ``pip install "flashsim[extra]"``) -> (the modules it brings, what needs them)
EXTRAS: dict[str, tuple[tuple[str, ...], str]] = {
    "kernels": (("torch", "triton"), "the Triton kernels"),
    "cpu": (("numba",), "the numba CPU kernel"),
    "lab": (("ipywidgets", "ipykernel"), "the dashboards"),
}
_LINUX_ONLY = {"triton"}


def absent(module: str) -> bool:
    """True when `module` cannot be imported here, found out without importing it (``find_spec``): importing
    triton before :mod:`flashsim.kernels` decides ``TRITON_INTERPRET`` would break the interpreter."""
    if module in sys.modules:
        return sys.modules[module] is None
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):
        return True


def not_installed(extra: str) -> str | None:
    """None when everything ``extra`` brings can be imported here; else the clause "torch and triton are not
    installed" (the modules that are missing)."""
    if extra not in EXTRAS:
        raise FlashsimError(f"unknown extra {extra!r}: flashsim's optional extras are {', '.join(EXTRAS)}")
    gone = [m for m in EXTRAS[extra][0] if absent(m)]
    if not gone:
        return None
    return f"{' and '.join(gone)} {'is' if len(gone) == 1 else 'are'} not installed"


def missing(extra: str) -> str | None:
    """None when everything ``extra`` brings can be imported here; else one line: what is missing and how to get it."""
    clause = not_installed(extra)
    if clause is None:
        return None
    needed_by = EXTRAS[extra][1]
    if any(m in _LINUX_ONLY and absent(m) for m in EXTRAS[extra][0]) and not sys.platform.startswith("linux"):
        return (f"{clause}: {needed_by} need Triton, which ships for Linux only ({sys.platform} here); run this "
                f"section on Linux or Colab, where pip install \"flashsim[{extra}]\" adds them.")
    return f"{clause}, so {needed_by} cannot run here: pip install \"flashsim[{extra}]\" adds them."


def require(extra: str) -> None:
    """Raise :class:`MissingExtra` with :func:`missing`'s line unless ``extra`` is installed."""
    why = missing(extra)
    if why is not None:
        raise MissingExtra(why)
