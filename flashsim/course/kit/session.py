"""The first call of every notebook: decide where the Triton kernels run, and say so in one line.

``start()`` makes the one explicit backend decision (:func:`flashsim.kernels.runtime.select_backend`): a CUDA GPU
when torch sees one, else Triton's interpreter on the CPU. It must come before any kernel is defined, because
Triton reads that choice when a kernel is decorated; every chapter's first cell calls it. It prints one calm line
to stdout and returns the :class:`~flashsim.kernels.runtime.Backend` (``backend.interpreter`` tells the mode).
Re-running the cell changes nothing. Introduced in chapter 00; every chapter uses it.
"""
from __future__ import annotations

from flashsim.kernels.runtime import Backend, select_backend

__all__ = ["start", "Backend"]


def start(interpret: bool | None = None, quiet: bool = False) -> Backend:
    """Decide where the kernels run (GPU, or the interpreter without one) and print one line saying so.

    ``interpret``: None (default) lets the machine decide; True forces the interpreter, False the GPU.
    ``quiet``: print nothing. Without torch or triton the line says how to install them (the simulator chapters
    work regardless).
    """
    backend = select_backend(interpret)
    if not quiet:
        print(backend.line())
    return backend
