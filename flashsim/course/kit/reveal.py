"""The one door to the answer key: ``flashsim.exercises.reveal("05")`` shows a chapter's worked solutions.

Nothing else in the package imports :mod:`flashsim.solutions` (import-linter's ``solutions-closed`` contract); the
solutions are loaded here by name, only when a learner asks.
"""
from __future__ import annotations

import importlib
import inspect

from flashsim.errors import FlashsimError

__all__ = ["reveal"]


def reveal(exercise: str) -> str:
    """The source of the worked solution(s) of `exercise` ("05" for chapter 05, "05.2" for one exercise)."""
    chapter = str(exercise).split(".")[0].zfill(2)
    try:
        module = importlib.import_module(f"flashsim.solutions.ch{chapter}")
    except ModuleNotFoundError:
        raise FlashsimError(f"no solutions for {exercise!r}: give a chapter number such as '05' or an exercise "
                            "such as '05.2'") from None
    source = inspect.getsource(module)
    print(source)
    return source
