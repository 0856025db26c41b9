"""Compile FlashAttention-4's Hopper backward (``FlashAttentionBackwardSm90``; ``--fwd``: its forward,
``FlashAttentionForwardSm90``) for sm_90a with no GPU; write its SASS.

Why: the course's Gluon backward is compared with FA4's on a GPU by time and by Nsight Compute, and device time is
scarce. FA4's kernel classes compile under torch's FakeTensorMode (no tensor is allocated) with the CuTe DSL told
the architecture (``CUTE_DSL_ARCH=sm_90a``), so its machine code can be read on a CPU-only machine beside the
course's (``gluon_compile_sm90.py --sass DIR``) and the two main loops compared with ``sass_loops.py``.

FA4's wheels are built for CPython 3.12; this script runs in a 3.12 environment with torch, einops and the wheels
that ``benchmarks/fa4_wheels.py`` fetches unpacked into one folder (as ``benchmarks/fa4_carry.sh`` does on the GPU
machine):

    python3.12 -m venv /tmp/fa4env && /tmp/fa4env/bin/pip install torch==2.13.0 einops
    for w in .whl/*.whl; do /tmp/fa4env/bin/python -m zipfile -e "$w" /tmp/fa4site; done
    PYTHONPATH=/tmp/fa4site:/tmp/fa4site/nvidia_cutlass_dsl/dsl_packages /tmp/fa4env/bin/python \\
        benchmarks/experiments/fa4_compile_sm90.py --d 128 --causal 0 --out /tmp/fa4sass

Writes ``DIR/fa4_bwd_<dtype>_d<d>_c<causal>.sass`` (``fa4_fwd_...`` with ``--fwd``; ``cuobjdump -sass`` of the main
kernel's cubin; the cuobjdump of the course's triton, or ``--cuobjdump``) and prints the main loop's line from
``sass_loops.py`` with the N of the trip's first wgmma as its rows (``Loop.query_rows``: FA4's tile_m in the
backward, the keys of a trip, tile_n, in the forward). About 15 s per kernel.
"""
from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sass_loops  # noqa: E402


def _cuobjdump(explicit: str | None) -> str:
    """The cuobjdump to disassemble with: the one named, one on PATH, or the one the course's triton bundles."""
    if explicit:
        return explicit
    found = shutil.which("cuobjdump")
    if found:
        return found
    bundled = glob.glob(str(Path(__file__).resolve().parents[2] / ".venv/lib/python3*/site-packages/triton/backends/"
                                                                  "nvidia/bin/cuobjdump"))
    if bundled:
        return bundled[0]
    raise SystemExit("no cuobjdump: pass --cuobjdump PATH (the course's triton bundles one under "
                     ".venv/lib/python3.*/site-packages/triton/backends/nvidia/bin/), or run `make venv` first")


def compile_kernel(what: str, d: int, causal: bool, dtype: str, dump_dir: str) -> None:
    """Compile FA4's sm90 backward (``what`` = "bwd") or forward ("fwd") for (2, 8192, 16, d) through its own
    interface under FakeTensorMode; the CuTe DSL writes the cubins into ``dump_dir``."""
    os.environ["CUTE_DSL_ARCH"] = "sm_90a"
    os.environ["FLASH_ATTENTION_ARCH"] = "90"
    os.environ["CUTE_DSL_KEEP_CUBIN"] = "1"
    os.environ["CUTE_DSL_DUMP_DIR"] = dump_dir
    try:
        import torch
        from torch._subclasses.fake_tensor import FakeTensorMode
        import flash_attn.cute.interface as fa4
    except ImportError as e:
        raise SystemExit(f"{e}: run this under Python 3.12 with FA4's wheels unpacked on PYTHONPATH (the recipe is "
                         "in this script's docstring)") from e
    fa4.get_num_sms_for_selection = lambda *a, **k: 132   # no GPU to ask: an H100 SXM's count
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    with FakeTensorMode():
        q = torch.empty(2, 8192, 16, d, dtype=dt, device="cuda")
        k, v, o, do = (torch.empty_like(q) for _ in range(4))
        if what == "fwd":
            fa4._flash_attn_fwd(q, k, v, causal=causal)
        else:
            lse = torch.empty(2, 16, 8192, dtype=torch.float32, device="cuda")
            fa4._flash_attn_bwd(q, k, v, o, do, lse, causal=causal)


#: the main kernel's class, whose cubin the DSL dump holds, per direction
KERNEL_CLASS = {"bwd": "FlashAttentionBackwardSm90", "fwd": "FlashAttentionForwardSm90"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--d", type=int, nargs="+", default=[64, 128])
    ap.add_argument("--causal", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--dtype", default="fp16", choices=["fp16", "bf16"])
    ap.add_argument("--out", default="/tmp/fa4sass")
    ap.add_argument("--cuobjdump", default=None)
    ap.add_argument("--fwd", action="store_true", help="the forward (FlashAttentionForwardSm90), not the backward")
    args = ap.parse_args(argv)
    what = "fwd" if args.fwd else "bwd"
    cls = KERNEL_CLASS[what]
    dis = _cuobjdump(args.cuobjdump)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    # one dump folder for the process (the DSL reads CUTE_DSL_DUMP_DIR once), emptied before each compile: the
    # file names of two configurations can be the same
    with tempfile.TemporaryDirectory() as dump:
        for d in args.d:
            for causal in args.causal:
                for old in glob.glob(f"{dump}/*"):
                    os.remove(old)
                compile_kernel(what, d, bool(causal), args.dtype, dump)
                cubins = glob.glob(f"{dump}/*{cls}*.cubin")
                if len(cubins) != 1:
                    raise SystemExit(f"expected one {cls} cubin in the DSL's dump, found "
                                     f"{len(cubins)} (a compile served from a cache writes none)")
                sass = subprocess.run([dis, "-sass", cubins[0]], capture_output=True, text=True,
                                      check=True).stdout
                path = Path(args.out) / f"fa4_{what}_{args.dtype}_d{d}_c{causal}.sass"
                path.write_text(sass)
                main_loop = sass_loops.main_loop(sass)
                print(sass_loops.describe(str(path), main_loop.summary(main_loop.query_rows())), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
