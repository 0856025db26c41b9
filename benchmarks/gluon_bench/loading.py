"""Loading the Gluon kernels and the course's Triton forward for benchmarks/gluon_validate.py, and the versions a
run records. ``flashsim.kernels.gluon`` is imported normally or, if the package is broken, from its files."""
from __future__ import annotations

import importlib.util
import platform
import subprocess
import sys
from pathlib import Path

#: the repository root
ROOT = Path(__file__).resolve().parents[2]


def load_gluon():
    """flashsim.kernels.gluon, imported normally or, if the package is broken, from its files."""
    try:
        import flashsim.kernels.gluon as g
        return g, "import"
    except Exception as exc:  # someone else's in-progress edit elsewhere in the package
        print(f"import flashsim.kernels.gluon failed ({type(exc).__name__}: {exc}); loading from files")
        return load_gluon_files(), "file"


def load_gluon_files():
    """flashsim/kernels/gluon loaded from its files as a standalone package ``flashsim_gluon`` (its kernels as
    ``flashsim_gluon.fwd_sm90`` / ``.bwd_sm90``), without importing flashsim.kernels (which picks a Triton backend:
    the interpreter on a CPU machine)."""
    pkg_dir = ROOT / "flashsim" / "kernels" / "gluon"
    spec = importlib.util.spec_from_file_location("flashsim_gluon", pkg_dir / "__init__.py",
                                                  submodule_search_locations=[str(pkg_dir)])
    g = importlib.util.module_from_spec(spec)
    sys.modules["flashsim_gluon"] = g
    spec.loader.exec_module(g)
    return g


def load_triton_forward():
    try:
        from flashsim.kernels import flash_forward
        return flash_forward, None
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}"


def versions():
    import torch
    import triton
    info = dict(python=platform.python_version(), torch=torch.__version__, triton=triton.__version__,
                cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),
                gpu=torch.cuda.get_device_name(0), sms=torch.cuda.get_device_properties(0).multi_processor_count)
    try:
        info["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.limit",
             "--format=csv,noheader"], capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception as exc:
        info["nvidia_smi"] = f"unavailable: {exc}"
    return info

