"""Triton for the chapter-12 exercise cell, or stand-ins where torch and triton are not installed (chapter 12).

The exercise is a ``@triton.jit`` function, so its cell needs ``triton`` and ``triton.language`` at definition
time. :func:`triton_modules` returns the real ones once the kernels' backend is chosen (Triton reads that choice
when triton is imported). In a lab-only install (``pip install "flashsim[lab]"``) it prints one line saying what is
missing and returns stand-ins instead: ``triton.jit`` keeps the learner's Python function as written (nothing is
compiled or run), and every ``tl.<name>`` the signature may mention (``tl.constexpr``) exists, so the cell runs, the
checker shows the grading recorded on a GPU, and the cells that need no triton (exercise 12.2, the kernel view)
run as they do everywhere.
"""
from __future__ import annotations

import functools

from flashsim.course.kit.optional import MissingExtra, missing
from flashsim.kernels.runtime import select_backend

__all__ = ["StandInKernel", "triton_modules"]


class StandInKernel:
    """A ``@triton.jit`` function defined where triton is not installed: the learner's Python function, kept.

    ``fn`` is the function (its source stays readable); calling it raises :class:`MissingExtra` with the line of
    :func:`flashsim.course.kit.optional.missing`."""

    def __init__(self, fn):
        self.fn = fn
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        raise MissingExtra(missing("kernels") or "triton is not installed")

    def __repr__(self) -> str:
        return f"<{self.fn.__name__}: a @triton.jit function, not compiled (torch and triton are not installed)>"


class _StandInTriton:
    """``triton`` where it is not installed: ``jit`` (with or without arguments) keeps the function."""

    __name__ = "triton (stand-in: not installed)"

    @staticmethod
    def jit(fn=None, **_options):
        return StandInKernel(fn) if fn is not None else StandInKernel


class _StandInLanguage:
    """``triton.language`` where it is not installed: any ``tl.<name>`` (``tl.constexpr``) is a placeholder, so a
    kernel's signature can be written; its body never runs."""

    __name__ = "triton.language (stand-in: not installed)"

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return type(name, (), {"__doc__": f"stand-in for triton.language.{name} (triton is not installed)"})


def triton_modules(quiet: bool = False):
    """(triton, triton.language) for the exercise cell: the real modules after the backend is chosen, or, without
    torch and triton, one line saying so (unless ``quiet``) and the stand-ins of this module."""
    why = missing("kernels")
    if why:
        if not quiet:
            print(f"{why} This chapter's exercise is a Triton kernel: your cell still defines it, the checker shows "
                  "the grading recorded on a GPU, and the cells that need no triton run here.")
        return _StandInTriton(), _StandInLanguage()
    select_backend()                 # before `import triton`: Triton reads the choice when it is imported
    import triton                    # lazy: the optional kernels extra
    import triton.language as tl
    return triton, tl
