"""The one door to the answer key: ``exercises.reveal("05.2")`` shows the worked solution of one exercise.

Nothing else in the package imports :mod:`flashsim.solutions` (import-linter's ``solutions-closed`` contract); the
solutions are loaded here by name, only when a learner asks. Each ``flashsim/solutions/chNN.py`` maps its exercise
ids to the functions that solve them in ``SOLUTIONS`` (``{"05.2": ("flash2_forward_loop",), ...}``).
"""
from __future__ import annotations

import importlib
import inspect

from flashsim.errors import FlashsimError

__all__ = ["reveal", "solution"]


def _module(chapter: str):
    try:
        return importlib.import_module(f"flashsim.solutions.ch{chapter}")
    except ModuleNotFoundError:
        raise FlashsimError(f"no solutions for chapter {chapter!r}: give an exercise id such as '05.2'") from None


def _ids(exercise: str) -> tuple[str, str]:
    text = str(exercise).strip()
    chapter, _, number = text.partition(".")
    if not chapter.isdigit() or (number and not number.isdigit()):
        raise FlashsimError(f"{exercise!r} is not an exercise id: write it as in the notebook, e.g. '05.2' (or '05' "
                            "for every exercise of chapter 05)")
    return chapter.zfill(2), f"{chapter.zfill(2)}.{number}" if number else ""


def solution(exercise: str):
    """The solution function(s) of `exercise` ("05.2"), for tests and for a learner who asked; FlashsimError if
    the id has no solution."""
    chapter, ex_id = _ids(exercise)
    table = getattr(_module(chapter), "SOLUTIONS", {})
    keys = [ex_id] if ex_id else sorted(table)
    if not keys or any(k not in table for k in keys):
        raise FlashsimError(f"no solution for exercise {exercise!r}: chapter {chapter}'s exercises are "
                            f"{', '.join(sorted(table)) or 'none'}")
    module = _module(chapter)
    return [getattr(module, name) for k in keys for name in table[k]]


def _source(fn) -> str:
    inner = getattr(fn, "fn", fn)                 # a @triton.jit function keeps the Python function in .fn
    try:
        return inspect.getsource(inner)
    except (OSError, TypeError):
        return getattr(fn, "src", repr(fn))


def reveal(exercise: str, quiet: bool = False) -> str:
    """Print and return the source of the worked solution of `exercise` ("05.2"; "05" for a whole chapter).

    This is the only place the course shows a solution: the checkers compare with the model's references, the
    dashboards use the learner's passing answer or the course's own kernels.
    """
    fns = solution(exercise)
    text = f"# worked solution of {exercise} (you asked for it: the checker still grades your own answer)\n\n"
    text += "\n\n".join(_source(f).rstrip() for f in fns) + "\n"
    if not quiet:
        print(text)
    return text
