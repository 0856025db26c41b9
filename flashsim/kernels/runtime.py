"""Which backend the Triton kernels run on: a CUDA GPU, or Triton's interpreter on the CPU, decided by one call.

Triton reads ``TRITON_INTERPRET`` when a function is *decorated* (``@triton.jit``), and ``import triton``
decorates its own library (``tl.zeros`` ...). So the choice has to be made before triton is imported, and never
changed afterwards. :func:`select_backend` makes it: GPU when torch sees a CUDA GPU, the interpreter otherwise,
unless the caller decided already (``interpret=`` or ``TRITON_INTERPRET`` in the environment).

``import flashsim.kernels`` takes a default through :func:`import_default` (the same rule), so that a kernel
module imported directly (``flashsim.kernels.split_kv``) never depends on what was imported before it. That
default holds only until triton is imported: an explicit ``select_backend(interpret=...)`` (the course's
``session.start()``) made before then replaces it, because importing this module (which runs the package's
``__init__``) must not take the choice away from the call that makes it. Code that imports triton itself
(benchmarks, chapter 12's template) calls :func:`select_backend` first; if triton came first anyway, it raises a
:class:`~flashsim.errors.FlashsimError` saying so instead of letting the kernels fail later.

It prints one line only where the choice is not the obvious one: when nobody chose, no GPU was found, and so the
first kernel used runs in the interpreter (:func:`announce_default`, on stderr, once). :meth:`Backend.line` is the
one calm sentence the course's session helper (:func:`flashsim.course.kit.session.start`) shows. Without torch or
triton it returns an ``"unavailable"`` backend saying why and how to fix it (the line of
:func:`flashsim.errors.missing`); :meth:`Backend.require` turns that into a :class:`~flashsim.errors.FlashsimError`.
This module imports neither torch nor triton at import time.

The same decision keeps floating-point fusion (a*b+c compiled to one FMA) on, as every measurement of the kernels
had it: ``TRITON_DEFAULT_FP_FUSION=1`` unless the caller set it. Triton 3.9 fuses by default but warns once per
process that 3.10 will not; the setting keeps the kernels' rounding and speed the same across that change and
spares a learner the warning.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from flashsim.errors import FlashsimError, not_installed

#: the install command that adds torch and triton (pyproject's ``kernels`` extra)
INSTALL_FIX = 'pip install "flashsim[kernels]"'

_ENV = "TRITON_INTERPRET"
_FP_FUSION_ENV = "TRITON_DEFAULT_FP_FUSION"


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
#: True while _DECIDED is import_default()'s choice by the machine rule (no TRITON_INTERPRET from the caller) that
#: no select_backend() call has confirmed or replaced
_IMPLICIT = False
_ANNOUNCED = False


def _env_interpret() -> bool | None:
    value = os.environ.get(_ENV)
    if value is None or value == "":
        return None
    return value not in ("0", "false", "False")


def _missing() -> str | None:
    """None, or which of torch and triton are not installed (the clause of :func:`flashsim.errors.missing`)."""
    return not_installed("kernels")


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
    os.environ.setdefault(_FP_FUSION_ENV, "1")      # fused multiply-adds, as measured (module docstring)
    if interpret:
        return Backend("interpreter", why)
    return Backend("gpu", why or "a CUDA GPU is available", device_name=torch.cuda.get_device_name(0))


def select_backend(interpret: bool | None = None) -> Backend:
    """Decide, once, whether the Triton kernels compile for a CUDA GPU or run in the interpreter.

    ``interpret``: None (default) keeps an earlier decision, else respects ``TRITON_INTERPRET`` when the caller set
    it, else takes the GPU when torch sees one and the interpreter otherwise. True or False asks for one
    explicitly. Sets ``TRITON_INTERPRET`` accordingly ("1" or "0") before any kernel is decorated. A second call
    asking for the other backend raises :class:`FlashsimError`: decorated kernels cannot change it (restart the
    Python process); only the default ``import flashsim.kernels`` took (:func:`import_default`) gives way, as long
    as triton has not been imported. Without torch or triton: a ``Backend("unavailable", ...)`` naming the fix,
    no exception.
    """
    global _DECIDED, _IMPLICIT
    if _DECIDED is not None and _DECIDED.available and interpret is not None \
            and bool(interpret) != _DECIDED.interpreter:
        if _IMPLICIT and "triton" not in sys.modules:    # the import's default, not yet read by Triton: replace it
            _DECIDED = None
        else:
            raise FlashsimError(f"the kernels already run on the {_DECIDED.kind} ({_DECIDED.reason}): Triton fixed "
                                "that when the kernels were decorated; restart the Python process (kernel) and "
                                f"call select_backend(interpret={interpret}) first")
    _IMPLICIT = False
    if _DECIDED is None or not _DECIDED.available:
        _DECIDED = _decide(interpret)
    return _DECIDED


def import_default() -> Backend:
    """The backend ``import flashsim.kernels`` takes when nobody chose before: :func:`select_backend`'s rule, kept
    as a default that an explicit ``select_backend(interpret=...)`` may still replace until triton is imported.
    A ``TRITON_INTERPRET`` the caller set is a choice, not a default: it holds as an explicit call does."""
    global _IMPLICIT
    if _DECIDED is not None and _DECIDED.available:
        return _DECIDED
    caller_chose = _env_interpret() is not None
    backend = select_backend()
    _IMPLICIT = not caller_chose
    return backend


def current() -> Backend:
    """The backend decided so far (:func:`import_default`'s when nobody chose), without deciding it again."""
    return _DECIDED if _DECIDED is not None else import_default()


def announce_default() -> None:
    """Say in one line (stderr, once per process) that the first kernel runs in the interpreter because no GPU was
    found and nobody chose: the one case where the default is not what a caller would assume. Silent on a GPU,
    after an explicit :func:`select_backend` (``session.start()`` says its own line), and when the caller set
    ``TRITON_INTERPRET``."""
    global _ANNOUNCED
    backend = current()
    if _IMPLICIT and not _ANNOUNCED and backend.kind == "interpreter" and backend.reason.startswith("no CUDA GPU"):
        _ANNOUNCED = True
        print(f"flashsim.kernels: {backend.line().rstrip('.')} ({_ENV}=1 for this process); call "
              "flashsim.kernels.select_backend() before the first kernel to choose explicitly and silence this line.",
              file=sys.stderr)


def interpreting() -> bool:
    """True when the kernels run in the interpreter (the decision of :func:`select_backend`, or the import's
    default)."""
    return current().interpreter
