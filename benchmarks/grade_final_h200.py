"""Grade the final exercise (chapter 12) on all three points on a GPU: the solution and two catalogued wrong kernels.

On the GPU machine (torch, triton, numpy; Nsight Compute on PATH for the IO point):

    PYTHONPATH=$PWD python benchmarks/grade_final_h200.py --out $OUT/grade_final_h200.json

For each kernel, :func:`flashsim.course.ch12.checks.check_flash_kernel` grades

1. output against the model's float64 attention (fp16, four cases: ragged N, padded head dim, causal, large scores);
2. IO: Nsight Compute's global load/store bytes of one launch against the kernel view
   (:func:`flashsim.model.kernel_io.kernel_io`), exactly; the verdict says whether the compiler merged a repeated
   load that the interpreter would count;
3. speed: do_bench medians next to the course's ``flash_forward`` and torch SDPA, each SDPA backend named.

The kernels: the solution (``exercises.reveal("12.1")``'s function) and, from the wrong-answer catalogue
(``tests/course/wrong_answers/ch12.py``), ``inner_loads_k_twice`` (right output, the source loads each K tile twice)
and ``inner_missing_rescale`` (wrong output). With ``--interpreter`` a child process (TRITON_INTERPRET=1) grades the
same kernels in the interpreter at the same cases, so the JSON holds the interpreter's count next to the GPU's.
Writes one JSON verdict file: {"device", "kernels": {name: {"passed", "diagnosis", "message", "details"}}, ...}.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HERE)
os.environ.setdefault("FLASHSIM_DATA_DIR", tempfile.mkdtemp(prefix="flashsim-grade-"))   # passes recorded, not in ~

from flashsim.kernels.runtime import select_backend  # noqa: E402


def _catalogue():
    path = os.path.join(HERE, "tests", "course", "wrong_answers", "ch12.py")
    spec = importlib.util.spec_from_file_location("wrong_answers_ch12", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def grade(interpreter: bool) -> dict:
    """{name: verdict summary} for the solution and the two catalogued wrong kernels, on this backend."""
    from flashsim.course.ch12.checks import check_flash_kernel
    from flashsim.course.kit.reveal import solution
    wrong = _catalogue()
    (sol,) = solution("12.1")
    kernels = {"solution": sol, **{name: getattr(wrong, name) for name in wrong.GPU_WRONG}}
    out = {}
    for name, fn in kernels.items():
        t0 = time.time()
        v = check_flash_kernel(fn, quiet=True, check_speed=not interpreter)
        out[name] = {"passed": bool(v), "diagnosis": v.diagnosis, "headline": v.headline(), "details": v.details,
                     "table": str(v.table) if v.table is not None else None, "seconds": round(time.time() - t0, 1)}
        print(v.headline(), flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="the JSON verdict file to write")
    ap.add_argument("--interpreter", action="store_true", help="also grade in a TRITON_INTERPRET=1 child process")
    ap.add_argument("--child-interpreter", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child_interpreter:
        select_backend(True)
        json.dump(grade(interpreter=True), sys.stdout, default=str)
        return 0
    backend = select_backend()
    if backend.interpreter:
        print("grade_final_h200: no CUDA GPU here; this script grades on a GPU (speed and Nsight Compute need one)")
        return 2
    import torch
    result = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "triton": __import__("triton").__version__, "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "kernels": grade(interpreter=False)}
    if args.interpreter:
        env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--out", "-", "--child-interpreter"],
                              capture_output=True, text=True, env=env, timeout=1800)
        try:
            result["interpreter"] = json.loads(proc.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            result["interpreter"] = {"error": (proc.stderr or proc.stdout)[-2000:]}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1, default=str)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
