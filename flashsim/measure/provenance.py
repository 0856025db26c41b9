"""What a measurement ran on: versions, GPU, driver, date and command, recorded with every benchmark result.

Every script under ``benchmarks/`` stores ``run_info()`` next to its numbers, so a result file always says which
GPU, which software and which command produced it (chapter 09 reads these files).
"""
from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
import time


def _command_output(args: list[str]) -> str | None:
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def code_tree(root: str | None = None) -> str | None:
    """The checkout the code ran from: its commit's short hash, plus how many paths differ from that commit (a GPU
    machine's copy of a working tree can carry an older commit's metadata); None unless `root` is the top of a git
    checkout.

    `root` defaults to the folder above this package: the repository root when flashsim runs from a checkout; an
    installed flashsim's folder is no checkout's top, even inside some other repository, so it gets None."""
    root = root or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    top = _command_output(["git", "-C", root, "rev-parse", "--show-toplevel"])
    if top is None or os.path.realpath(top) != os.path.realpath(root):
        return None
    head = _command_output(["git", "-C", root, "rev-parse", "--short", "HEAD"])
    if head is None:
        return None
    status = _command_output(["git", "-C", root, "status", "--porcelain"])
    changed = len(status.splitlines()) if status else 0
    return head + (f" + {changed} paths changed or added since" if changed else "")


def run_info(command: str | None = None) -> dict:
    """Versions (python, torch, triton, numpy), date (UTC), command, the code's tree (:func:`code_tree`), and the
    GPU(s) or CPU this process sees.

    With a CUDA GPU: name, SM count, L2 and memory bytes of GPU 0, all GPU names, CUDA, cuDNN and NCCL versions,
    the driver and clocks from nvidia-smi, and ncu's version when ncu is on PATH. Without: the CPU and core count.
    `command` defaults to this process's own command line.
    """
    import numpy
    import torch
    import triton

    info = {"python": platform.python_version(), "torch": torch.__version__, "triton": triton.__version__,
            "numpy": numpy.__version__, "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
            "command": command or "python " + " ".join(shlex.quote(a) for a in sys.argv), "tree": code_tree()}
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        info.update(gpu=p.name, gpus=[torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
                    sms=p.multi_processor_count, l2_bytes=getattr(p, "L2_cache_size", None),
                    memory_bytes=p.total_memory, cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version())
        try:
            info["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        except (AttributeError, RuntimeError, TypeError):
            info["nccl"] = None
        info["driver"] = _command_output(["nvidia-smi", "--query-gpu=driver_version,clocks.sm,clocks.mem,"
                                          "clocks.max.sm,power.limit", "--format=csv,noheader"])
        info["ncu"] = _command_output(["ncu", "--version"])
    else:
        info.update(gpu=None, gpus=[], cpu=platform.processor() or platform.machine(), cores=os.cpu_count())
    return info
