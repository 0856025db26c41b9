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

import os
import platform
import sys
from dataclasses import dataclass, field

from flashsim.errors import FlashsimError
from flashsim.kernels.runtime import select_backend

from flashsim.model.table import Table

__all__ = ["ENV_VAR", "size", "is_small", "pick", "device_report", "DeviceReport", "Table", "COURSE_MAP",
           "course_map"]

#: the environment variable that chooses the size; "small" (CI) or unset/"full"
ENV_VAR = "FLASHSIM_SIZE"
_VALID = ("small", "full")


def size() -> str:
    """Chapter 00: ``"small"`` when FLASHSIM_SIZE=small (CI), else ``"full"`` (unset, empty or "full"). Read on every call."""
    raw = os.environ.get(ENV_VAR, "").strip().lower()
    if raw in ("", "full"):
        return "full"
    if raw == "small":
        return "small"
    raise FlashsimError(f"{ENV_VAR}={os.environ.get(ENV_VAR)!r} is not a size: use {ENV_VAR}=small (CI) or leave it "
                        "unset / set it to full")


def is_small() -> bool:
    """True when the notebooks run at CI size (FLASHSIM_SIZE=small; chapter 00)."""
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


def _version(dist: str):
    """Installed version of a distribution, read from its metadata: nothing is imported (importing triton before
    :mod:`flashsim.kernels` decides TRITON_INTERPRET would break the interpreter)."""
    from importlib import metadata
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        if dist == "flashsim":
            return _package_version()
        return None


def _package_version() -> str:
    """flashsim's own version when it is not installed as a distribution (a source checkout on sys.path)."""
    import flashsim  # the package root, already imported by whoever imported this module

    return flashsim.__version__


def device_report() -> DeviceReport:
    """Which device the course's kernels will use, and the versions installed (chapter 00).

    The backend is the one decision :func:`flashsim.kernels.runtime.select_backend` makes (a CUDA GPU when torch
    sees one, unless TRITON_INTERPRET forces the interpreter; the interpreter on a CPU). Without torch or triton
    (a ``[lab]``-only install) the report says so and how to install them; the simulator chapters need neither.
    """
    backend = select_backend()
    versions = {"python": platform.python_version()}
    for name in ("flashsim", "torch", "triton", "numpy", "numba", "matplotlib", "ipywidgets"):
        versions[name] = _version(name)
    props = _cuda_properties() if backend.available else None
    gpu = props is not None
    interpreter = backend.interpreter
    details: dict = {}
    if props is not None:
        details = {"GPU memory": f"{props['total_memory'] / 1024**3:.1f} GiB", "SMs": props["sms"],
                   "compute capability": props["capability"], "CUDA (torch)": props["cuda"]}
        if props.get("l2"):
            details["L2"] = f"{props['l2'] / 1024**2:.0f} MiB"
        device = f"{props['name']} (Triton interpreter forced by TRITON_INTERPRET)" if interpreter else props["name"]
    elif backend.available:
        device = "Triton interpreter on CPU"
        details = {"CPU": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                   "note": "no CUDA GPU: kernels run in the Triton interpreter at small sizes; "
                           "the simulator does not need a GPU"}
    else:
        device = "simulator only (no Triton kernels)"
        details = {"CPU": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                   "note": backend.line()}
    return DeviceReport(device=device, gpu=gpu, interpreter=interpreter, details=details, versions=versions,
                        size=size())


def _cuda_properties() -> dict | None:
    """Name, memory, SMs, capability and L2 of CUDA device 0, or None without a CUDA GPU (torch imported here,
    only once the backend is decided and torch is known to be installed)."""
    import torch

    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(0)
    return {"name": props.name, "total_memory": props.total_memory, "sms": props.multi_processor_count,
            "capability": f"{props.major}.{props.minor}", "cuda": torch.version.cuda,
            "l2": getattr(props, "L2_cache_size", None)}


#: the course, one line per chapter: (number, notebook file, title, what it shows)
COURSE_MAP = [
    ("00", "00_start_here.ipynb", "Start here",
     "the device found, versions, how the sliders and exercises work, this map, one vocabulary (a glossary)"),
    ("01", "01_memory_hierarchy.ipynb", "The memory hierarchy",
     "HBM vs L2 vs SRAM, bandwidth, the roofline, memory- vs compute-bound, device presets side by side"),
    ("02", "02_standard_attention.ipynb", "Standard attention and its traffic",
     "Algorithm 0 step by step, S at N=8192 is 128 MiB, traffic vs N, the eager framework's op-by-op bytes, "
     "S and P's round trips counted launch by launch"),
    ("03", "03_tiling.ipynb", "Tiling",
     "tiled Q Kᵀ in SRAM-sized tiles, SRAM and block-size sliders, the paper's block-size rule, tiles that do not fit"),
    ("04", "04_online_softmax.ipynb", "Online softmax",
     "running max and sum, the rescale, the merge operator, why the max is subtracted (fp16 overflow)"),
    ("05", "05_flash_forward.ipynb", "FlashAttention forward",
     "the loop animated, exact but not bitwise, traffic vs block size (FA1 Fig. 2), FA1 vs FA2 loop order and "
     "each one's block rule, the kernel's tile loop counted"),
    ("06", "06_linear_memory.ipynb", "O(N) memory",
     "peak memory naive vs flash as N grows, measured; the longest context that fits"),
    ("07", "07_backward.ipynb", "The backward pass",
     "recompute vs store P, Algorithm 4 step by step, a gradient check, the backward's three launches"),
    ("08", "08_causal.ipynb", "Causal masking", "per-tile masks, skipped tiles, the ~2x saving, animated"),
    ("09", "09_why_speedup.ipynb", "Why the speedup is real",
     "Θ(N²d²/M) vs the measured sweep, the roofline time model, FA1 Fig. 2 left, L2 and DRAM bytes"),
    ("10", "10_cpu_view.ipynb", "The CPU view",
     "caches as the fast tier, a numba blocked kernel vs naive numpy, block size vs cache size"),
    ("11", "11_pitfalls.ipynb", "Pitfalls",
     "short sequences, mask/dtype mismatches, not sub-quadratic, the missing-rescale bug and its drift"),
    ("12", "12_final_exercise.ipynb", "Write the FlashAttention kernel",
     "write the FlashAttention forward kernel's loop in Triton; graded on output, IO and (on a GPU) speed against "
     "SDPA; block sizes measured"),
    ("13", "13_beyond_one_gpu.ipynb", "Beyond one GPU",
     "flash-decoding (split K/V, logsumexp combine), ring attention stepped, the overlap condition, "
     "a real ring with torch.distributed"),
    ("14", "14_hopper_full_speed.ipynb", "Hopper at full speed",
     "producer/consumer warps, the mbarrier ring and its phases, ping-pong and longest-first persistent "
     "scheduling, simulated on a CPU; a warp-specialized kernel measured against cuDNN"),
]


def course_map() -> Table:
    """The map of the course as a table, one line per chapter (chapter 00)."""
    return Table(["#", "chapter", "what it shows", "notebook"],
                 [[n, title, what, nb] for n, nb, title, what in COURSE_MAP])


if __name__ == "__main__":  # pragma: no cover
    print(device_report())
    sys.exit(0)
