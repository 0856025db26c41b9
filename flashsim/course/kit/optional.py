"""What a course section needs beyond the base package and ``[lab]``, and the one line it prints when that is missing.

Every chapter runs to its end with only ``pip install "flashsim[lab]"``: a section that needs an optional extra asks
here first, and where the extra is missing it prints one line (what is missing, how to install it) and shows the
recorded measurements instead (:mod:`flashsim.course.kit.real_gpu`, :mod:`flashsim.course.kit.results`)::

    from flashsim.course.kit.optional import missing, require
    why = missing("kernels")    # None, or: 'torch and triton are not installed: ... pip install "flashsim[kernels]"'
    if why:
        print(why)              # then show the recorded result
    require("cpu")              # raises MissingExtra (an ImportError and a FlashsimError) carrying that line

Nothing is imported to find out (``importlib.util.find_spec``): importing triton before :mod:`flashsim.kernels`
decides ``TRITON_INTERPRET`` would break the interpreter, and torch takes seconds to import.
"""
from __future__ import annotations

import importlib.util
import sys

from flashsim.errors import FlashsimError

__all__ = ["EXTRAS", "MissingExtra", "missing", "require"]

#: extra (as in ``pip install "flashsim[extra]"``) -> (the modules it brings, what needs them)
EXTRAS: dict[str, tuple[tuple[str, ...], str]] = {
    "kernels": (("torch", "triton"), "the Triton kernels"),
    "cpu": (("numba",), "the numba CPU kernel"),
    "lab": (("ipywidgets", "ipykernel"), "the dashboards"),
}
_LINUX_ONLY = {"triton"}


class MissingExtra(FlashsimError, ImportError):
    """An optional extra of flashsim is not installed; the message says which and how to install it."""


def _absent(module: str) -> bool:
    if module in sys.modules:
        return sys.modules[module] is None
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):
        return True


def missing(extra: str) -> str | None:
    """None when everything ``extra`` brings can be imported here; else one line: what is missing and how to get it."""
    if extra not in EXTRAS:
        raise FlashsimError(f"unknown extra {extra!r}: flashsim's optional extras are {', '.join(EXTRAS)}")
    modules, needed_by = EXTRAS[extra]
    absent = [m for m in modules if _absent(m)]
    if not absent:
        return None
    names = " and ".join(absent)
    verb = "is" if len(absent) == 1 else "are"
    if set(absent) & _LINUX_ONLY and not sys.platform.startswith("linux"):
        return (f"{names} {verb} not installed: {needed_by} need Triton, which ships for Linux only ({sys.platform} "
                f"here); run this section on Linux or Colab, where pip install \"flashsim[{extra}]\" adds them.")
    return f"{names} {verb} not installed, so {needed_by} cannot run here: pip install \"flashsim[{extra}]\" adds them."


def require(extra: str) -> None:
    """Raise :class:`MissingExtra` with :func:`missing`'s line unless ``extra`` is installed."""
    why = missing(extra)
    if why is not None:
        raise MissingExtra(why)
