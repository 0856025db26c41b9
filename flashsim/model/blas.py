"""One BLAS thread for step mode's many tiny tile matmuls (chapters 02-05).

Step mode multiplies thousands of small tiles (e.g. 128×64 by 64×128). OpenBLAS's threads only add
synchronisation there, and on a busy 2-core machine they make step mode 5-10× slower. :func:`single_blas_thread`
sets numpy's OpenBLAS to one thread for a block of code and restores the setting afterwards. Best effort: a no-op
when the BLAS library numpy uses cannot be found.
"""
from __future__ import annotations

import contextlib

import numpy as np

@contextlib.contextmanager
def single_blas_thread():
    """Run the block on one OpenBLAS thread, then restore the previous thread count."""
    lib = _openblas()
    if lib is None:
        yield
        return
    get, set_ = lib
    try:
        before = int(get())
        set_(1)
    except Exception:  # noqa: BLE001 - a foreign BLAS: leave it alone
        yield
        return
    try:
        yield
    finally:
        set_(before)


_OPENBLAS_CACHE: list = []


def _openblas():
    if _OPENBLAS_CACHE:
        return _OPENBLAS_CACHE[0]
    found = None
    try:
        import ctypes
        import glob
        import os
        root = os.path.dirname(os.path.dirname(np.__file__))
        paths = glob.glob(os.path.join(root, "numpy.libs", "*openblas*")) + \
            glob.glob(os.path.join(os.path.dirname(np.__file__), ".dylibs", "*openblas*"))
        for path in paths:
            lib = ctypes.CDLL(path)
            for get_name, set_name in (("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
                                       ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
                                       ("openblas_get_num_threads", "openblas_set_num_threads")):
                if hasattr(lib, get_name) and hasattr(lib, set_name):
                    get, set_ = getattr(lib, get_name), getattr(lib, set_name)
                    get.restype = ctypes.c_int
                    set_.argtypes = [ctypes.c_int]
                    found = (get, set_)
                    break
            if found:
                break
    except Exception:  # noqa: BLE001 - best effort only
        found = None
    _OPENBLAS_CACHE.append(found)
    return found
