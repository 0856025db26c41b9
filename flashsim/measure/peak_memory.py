"""Measure the peak memory of one call, on the CPU and on a GPU (chapters 06 and 10).

Chapter 06's claim is that FlashAttention needs O(N) extra memory where standard attention needs O(N^2). These
two functions measure it rather than compute it:

* :func:`peak_memory_cpu` uses Python's ``tracemalloc`` for numpy code: numpy reports every array buffer it
  allocates to tracemalloc, so the peak of traced memory during the call is the peak of the arrays the call held.
  (:func:`flashsim.cpu.flash_attention_cpu` allocates all its arrays with numpy before entering compiled code
  for exactly this reason.) Memory that numpy does not allocate is invisible to tracemalloc: torch's CPU
  allocator, or arrays created inside numba-compiled code. For those, ``method="rss"`` measures the process's
  peak resident set size instead: Linux resets the high-water mark (VmHWM) when "5" is written to
  /proc/self/clear_refs, and VmHWM minus the RSS before the call is the peak growth. That counts pages actually
  touched, whoever allocated them; it is coarser (page granularity, and memory the allocator already holds from
  earlier calls is reused without showing up), so it is for large sizes.
* :func:`peak_memory_gpu` uses torch's CUDA caching allocator statistics: ``torch.cuda.reset_peak_memory_stats``
  before the call and ``torch.cuda.max_memory_allocated`` after it. torch is imported only when it is called.

Both return the peak *growth* in bytes during the call: memory held before the call (the inputs) is not counted,
the output is.

>>> import numpy as np
>>> peak_memory_cpu(np.ones, 1_000_000) >= 8_000_000
True
"""
from __future__ import annotations

import gc
import tracemalloc

from flashsim.errors import FlashsimError

__all__ = ["peak_memory_cpu", "peak_memory_gpu", "rss_peak_supported"]

_CLEAR_REFS = "/proc/self/clear_refs"
_STATUS = "/proc/self/status"


def _status_kib(field: str) -> int:
    with open(_STATUS) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise FlashsimError(f"{_STATUS} has no {field} line")


def rss_peak_supported() -> bool:
    """Whether this OS lets us reset and read the peak RSS (Linux: /proc/self/clear_refs and VmHWM)."""
    try:
        with open(_CLEAR_REFS, "w") as f:
            f.write("5")
        _status_kib("VmHWM")
        return True
    except (OSError, FlashsimError):
        return False


def _looks_like_torch(args) -> bool:
    return any(type(a).__module__.startswith("torch") for a in args)


def peak_memory_cpu(fn, *args, method: str = "auto", **kwargs) -> int:
    """Peak memory growth in bytes while ``fn(*args, **kwargs)`` runs on the CPU.

    method: ``"tracemalloc"`` (numpy code: exact, byte-granular), ``"rss"`` (any allocator: torch, numba; peak
    resident set size, page-granular, Linux only) or ``"auto"`` (rss when an argument is a torch tensor, else
    tracemalloc).
    """
    if not callable(fn):
        raise FlashsimError(f"peak_memory_cpu: fn={fn!r} is not callable; pass the function, then its arguments")
    if method == "auto":
        method = "rss" if _looks_like_torch(args) or _looks_like_torch(kwargs.values()) else "tracemalloc"
    if method == "tracemalloc":
        return _peak_tracemalloc(fn, args, kwargs)
    if method == "rss":
        return _peak_rss(fn, args, kwargs)
    raise FlashsimError(f"peak_memory_cpu: method={method!r}; use 'auto', 'tracemalloc' or 'rss'")


def _peak_tracemalloc(fn, args, kwargs) -> int:
    gc.collect()
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        result = fn(*args, **kwargs)
        peak = tracemalloc.get_traced_memory()[1]
        del result
        return max(0, peak - before)
    finally:
        if not was_tracing:
            tracemalloc.stop()


def _peak_rss(fn, args, kwargs) -> int:
    if not rss_peak_supported():
        raise FlashsimError("peak_memory_cpu(method='rss') needs Linux (/proc/self/clear_refs and VmHWM); use "
                            "method='tracemalloc' for numpy code")
    gc.collect()
    with open(_CLEAR_REFS, "w") as f:
        f.write("5")  # resets VmHWM to the current RSS
    before = _status_kib("VmRSS")
    result = fn(*args, **kwargs)
    peak = _status_kib("VmHWM")
    del result
    return max(0, (peak - before) * 1024)


def peak_memory_gpu(fn, *args, device=None, **kwargs) -> int:
    """Peak GPU memory growth in bytes while ``fn(*args, **kwargs)`` runs, from torch's CUDA allocator.

    Counts tensors allocated through torch's caching allocator (torch ops, Triton kernels' torch outputs), which
    is all of it for torch and Triton code. ``device`` defaults to the current CUDA device.
    """
    import torch  # lazily: the package works without a GPU

    if not torch.cuda.is_available():
        raise FlashsimError("peak_memory_gpu needs a CUDA GPU (torch.cuda.is_available() is False); use "
                            "peak_memory_cpu on this machine")
    if not callable(fn):
        raise FlashsimError(f"peak_memory_gpu: fn={fn!r} is not callable; pass the function, then its arguments")
    dev = torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)
    gc.collect()
    torch.cuda.synchronize(dev)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(dev)
    before = torch.cuda.memory_allocated(dev)
    result = fn(*args, **kwargs)
    torch.cuda.synchronize(dev)
    peak = torch.cuda.max_memory_allocated(dev)
    del result
    return max(0, peak - before)
