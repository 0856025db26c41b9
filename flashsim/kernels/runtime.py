"""Which backend the Triton kernels run on: a CUDA GPU, or Triton's interpreter on the CPU, decided by one call.

Triton reads ``TRITON_INTERPRET`` when a function is *decorated* (``@triton.jit``), and ``import triton``
decorates its own library (``tl.zeros`` ...). So the choice has to be made once, before triton is imported, and
never changed afterwards. :func:`select_backend` makes it: GPU when torch sees a CUDA GPU, the interpreter
otherwise, unless the caller decided already (``interpret=`` or ``TRITON_INTERPRET`` in the environment).
``flashsim.kernels`` calls it when imported, before any kernel module imports triton, so importing a kernel never
depends on what was imported before it. Code that imports triton itself (benchmarks, chapter 12's template)
calls it first; if triton came first anyway, it raises a :class:`~flashsim.errors.FlashsimError` saying so instead
of letting the kernels fail later.

It prints nothing: :meth:`Backend.line` is the one calm sentence the course's session helper
(:func:`flashsim.course.kit.session.start`) shows. Without torch or triton installed it returns an
``"unavailable"`` backend saying why and how to fix it; :meth:`Backend.require` turns that into a
:class:`~flashsim.errors.FlashsimError`. This module imports neither torch nor triton at import time.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass

from flashsim.errors import FlashsimError

#: the install command that adds torch and triton (pyproject's ``kernels`` extra)
INSTALL_FIX = 'pip install "flashsim[kernels]"'

_ENV = "TRITON_INTERPRET"


@dataclass(frozen=True)
class Backend:
    """Where the kernels run. ``kind``: "gpu", "interpreter" or "unavailable"; ``reason``: why, in one clause;
    ``fix``: what to do when unavailable; ``device_name``: the GPU's name ("" otherwise)."""
    kind: str
    reason: str
    fix: str = ""
    device_name: str = ""

    @property
    def interpreter(self) -> bool:
        """True unless the kernels compile for a CUDA GPU (CPU tensors, numpy semantics)."""
        return self.kind != "gpu"

    @property
    def available(self) -> bool:
        return self.kind != "unavailable"

    def line(self) -> str:
        """One calm sentence for a learner: where the kernels run, and what that means."""
        if self.kind == "gpu":
            return f"CUDA GPU ({self.device_name}): the Triton kernels compile for it and run at full size."
        if self.kind == "interpreter":
            if self.reason.startswith("no CUDA GPU"):
                return "No CUDA GPU: the Triton kernels run in Triton's interpreter on the CPU, at small sizes."
            return f"The Triton kernels run in Triton's interpreter on the CPU ({self.reason}), at small sizes."
        return f"The Triton kernels are not available ({self.reason}): {self.fix} adds them; the simulator works " \
               "without them."

    def require(self) -> Backend:
        """This backend, or a FlashsimError naming the fix when torch or triton is missing."""
        if not self.available:
            raise FlashsimError(f"the Triton kernels need torch and triton ({self.reason}): {self.fix}")
        return self


_DECIDED: Backend | None = None


def _env_interpret() -> bool | None:
    value = os.environ.get(_ENV)
    if value is None or value == "":
        return None
    return value not in ("0", "false", "False")


def _missing() -> str | None:
    for name in ("torch", "triton"):
        if importlib.util.find_spec(name) is None:
            return f"{name} is not installed"
    return None


def _decide(interpret: bool | None) -> Backend:
    missing = _missing()
    if missing:
        return Backend("unavailable", missing, INSTALL_FIX)
    import torch
    has_gpu = bool(torch.cuda.is_available())
    env = _env_interpret()
    if interpret is None and env is not None:
        interpret, why = env, f"{_ENV}={os.environ[_ENV]} was set by the caller"
    elif interpret is None:
        interpret, why = not has_gpu, ("no CUDA GPU found" if not has_gpu else "")
    else:
        why = f"select_backend(interpret={interpret}) asked for it"
    if not interpret and not has_gpu:
        raise FlashsimError(f"{why}, but torch sees no CUDA GPU: run on a machine with one, or leave the choice "
                            "to select_backend() (no argument: the interpreter on a CPU)")
    if "triton" in sys.modules and bool(interpret) != bool(env):
        raise FlashsimError(f"triton was imported before the backend was chosen, so its own functions are compiled "
                            f"for the {'GPU' if env is not True else 'interpreter'}: call "
                            "flashsim.course.kit.session.start() (or flashsim.kernels.select_backend()) before "
                            f"`import triton`, or set {_ENV}={'1' if interpret else '0'} before starting Python")
    os.environ[_ENV] = "1" if interpret else "0"
    if interpret:
        return Backend("interpreter", why)
    return Backend("gpu", why or "a CUDA GPU is available", device_name=torch.cuda.get_device_name(0))


def select_backend(interpret: bool | None = None) -> Backend:
    """Decide, once, whether the Triton kernels compile for a CUDA GPU or run in the interpreter.

    ``interpret``: None (default) keeps an earlier decision, else respects ``TRITON_INTERPRET`` when the caller set
    it, else takes the GPU when torch sees one and the interpreter otherwise. True or False asks for one
    explicitly. Sets ``TRITON_INTERPRET`` accordingly ("1" or "0") before any kernel is decorated. A second call
    asking for the other backend raises :class:`FlashsimError`: decorated kernels cannot change it (restart the
    Python process). Without torch or triton: a ``Backend("unavailable", ...)`` naming the fix, no exception.
    """
    global _DECIDED
    if _DECIDED is not None and _DECIDED.available:
        if interpret is not None and bool(interpret) != _DECIDED.interpreter:
            raise FlashsimError(f"the kernels already run on the {_DECIDED.kind} ({_DECIDED.reason}): Triton fixed "
                                "that when the kernels were decorated; restart the Python process (kernel) and "
                                f"call select_backend(interpret={interpret}) first")
        return _DECIDED
    _DECIDED = _decide(interpret)
    return _DECIDED


def interpreting() -> bool:
    """True when the kernels run in the interpreter (the decision of :func:`select_backend`)."""
    return select_backend().interpreter
