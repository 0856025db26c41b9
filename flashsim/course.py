"""Course plumbing shared by every notebook: problem sizes and the device report (chapter 00).

Sizes
-----
Every notebook runs at two sizes. CI sets ``FLASHSIM_SIZE=small`` and executes each notebook in well under a
minute on a 2-core CPU; unset (or ``full``) gives the sizes the text talks about, meant for a GPU or a patient
CPU. A notebook never tests the variable itself; it asks for a value::

    from flashsim.course import pick
    n = pick(small=256, full=8192)          # 256 in CI, 8192 otherwise

:func:`size` says which size is in force, :func:`is_small` is the same as a bool. Unknown values of the variable
raise a :class:`~flashsim.errors.FlashsimError` naming the two valid ones, so a typo does not silently run the full
size in CI.

Device report
-------------
:func:`device_report` says what chapter 00 found: a CUDA GPU (its name, memory, SM count) or the Triton
interpreter on the CPU, and the versions of Python, torch, triton, numpy, numba and (when installed) ipywidgets
and matplotlib. It imports torch lazily and never imports :mod:`flashsim.kernels`, so asking does not switch the
interpreter on by itself.
"""
from __future__ import annotations

import importlib
import os
import platform
import sys
from dataclasses import dataclass, field

from .errors import FlashsimError

__all__ = ["ENV_VAR", "size", "is_small", "pick", "device_report", "DeviceReport"]

#: the environment variable that chooses the size; "small" (CI) or unset/"full"
ENV_VAR = "FLASHSIM_SIZE"
_VALID = ("small", "full")


def size() -> str:
    """``"small"`` when FLASHSIM_SIZE=small (CI), else ``"full"`` (unset, empty or "full"). Read on every call."""
    raw = os.environ.get(ENV_VAR, "").strip().lower()
    if raw in ("", "full"):
        return "full"
    if raw == "small":
        return "small"
    raise FlashsimError(f"{ENV_VAR}={os.environ.get(ENV_VAR)!r} is not a size: use {ENV_VAR}=small (CI) or leave it "
                        "unset / set it to full")


def is_small() -> bool:
    """True when the notebooks run at CI size (FLASHSIM_SIZE=small)."""
    return size() == "small"


def pick(small, full):
    """The value for the size in force: `small` when FLASHSIM_SIZE=small, else `full` (chapter 00).

    >>> import os; os.environ["FLASHSIM_SIZE"] = "small"; pick(small=256, full=8192)
    256
    """
    return small if is_small() else full


@dataclass
class DeviceReport:
    """What chapter 00 prints: the device the kernels will run on, and the software versions."""

    device: str                     # "NVIDIA H200" or "Triton interpreter on CPU"
    gpu: bool                       # a CUDA GPU is available to torch
    interpreter: bool               # the Triton kernels will run in the interpreter
    details: dict = field(default_factory=dict)    # GPU memory, SMs, capability; or CPU model and cores
    versions: dict = field(default_factory=dict)   # package -> version (None: not installed)
    size: str = "full"

    def lines(self) -> list[str]:
        out = [f"device:  {self.device}"]
        out += [f"  {k}: {v}" for k, v in self.details.items()]
        out.append(f"size:    {self.size} (FLASHSIM_SIZE={os.environ.get(ENV_VAR, '') or 'unset'})")
        out.append("versions:")
        out += [f"  {k:<11} {v if v is not None else 'not installed'}" for k, v in self.versions.items()]
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><td>{k}</td><td>{v}</td></tr>" for k, v in self.details.items())
        vers = "".join(f"<tr><td>{k}</td><td>{v if v is not None else '<i>not installed</i>'}</td></tr>"
                       for k, v in self.versions.items())
        return (f"<p><b>Device:</b> {self.device} &nbsp; <b>size:</b> {self.size}</p>"
                f"<table>{rows}</table><p><b>Versions</b></p><table>{vers}</table>")

    def as_dict(self) -> dict:
        return {"device": self.device, "gpu": self.gpu, "interpreter": self.interpreter, "details": self.details,
                "versions": self.versions, "size": self.size}


def _version(module: str):
    try:
        mod = importlib.import_module(module)
    except Exception:
        return None
    return getattr(mod, "__version__", "unknown")


def device_report() -> DeviceReport:
    """Which device the course's kernels will use, and the versions installed (chapter 00).

    A CUDA GPU when torch sees one (unless TRITON_INTERPRET is set, which forces the interpreter), else the
    Triton interpreter on the CPU.
    """
    import torch

    versions = {"python": platform.python_version()}
    for name in ("flashsim", "torch", "triton", "numpy", "numba", "matplotlib", "ipywidgets"):
        versions[name] = _version(name)
    gpu = bool(torch.cuda.is_available())
    forced = os.environ.get("TRITON_INTERPRET", "") not in ("", "0")
    interpreter = forced or not gpu
    details: dict = {}
    if gpu:
        props = torch.cuda.get_device_properties(0)
        name = props.name
        details = {"GPU memory": f"{props.total_memory / 1024**3:.1f} GiB", "SMs": props.multi_processor_count,
                   "compute capability": f"{props.major}.{props.minor}", "CUDA (torch)": torch.version.cuda}
        l2 = getattr(props, "L2_cache_size", None)
        if l2:
            details["L2"] = f"{l2 / 1024**2:.0f} MiB"
        device = f"{name} (Triton interpreter forced by TRITON_INTERPRET)" if forced else name
    else:
        device = "Triton interpreter on CPU"
        details = {"CPU": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                   "note": "no CUDA GPU: kernels run in the Triton interpreter at small sizes; "
                           "the simulator does not need a GPU"}
    return DeviceReport(device=device, gpu=gpu, interpreter=interpreter, details=details, versions=versions,
                        size=size())


if __name__ == "__main__":  # pragma: no cover
    print(device_report())
    sys.exit(0)
