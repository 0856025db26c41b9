"""FlashAttention-4 (``flash-attn-4`` on PyPI: ``flash_attn.cute``, written in the CuTe DSL, with sm90 and sm100
forward and backward kernels) as an optional reference column of the attention benchmarks (attention_speed.py and
gluon_validate.py). The course never needs it: the import is guarded, and where it fails the column is absent and
:func:`available` says why.

The course's tensors are (B, H, N, d); FA4 takes (B, N, H, d). The adapter hands FA4 transposed *views* (no copy:
FA4 accepts any layout whose last dimension is contiguous and whose strides are 16-byte aligned) and transposes its
output back, so that timing it times FA4's kernels and nothing else. Through autograd (``q.requires_grad``) the
backward is FA4's whole backward: its preprocess (rowsum of dO*O, zeroing the fp32 dQ accumulator), the main kernel
and the postprocess that converts dQ to the input dtype.

FA4 compiles each kernel on first use (seconds to tens of seconds each). ``FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1``
keeps the compiled kernels on disk (``FLASH_ATTENTION_CUTE_DSL_CACHE_DIR``), as Triton keeps the course's, and
:func:`warm` compiles the grid's kernels (FA4's and the course's) in parallel processes first, so that a timed run
loads them instead of compiling them one after another:

    python3 -m benchmarks.gluon_bench.fa4 --warm --n 8192 [--jobs 8]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

#: the import name; tests replace :func:`_load` to fake it
MODULE = "flash_attn.cute"
_state: dict = {}


def _load():
    """``flash_attn.cute.flash_attn_func`` and FA4's version, or raises (ImportError, a CUDA error, ...)."""
    import importlib
    import importlib.metadata as md
    for key, value in cache_env().items():    # read when FA4 is imported: compiled kernels kept on disk
        os.environ.setdefault(key, value)
    mod = importlib.import_module(MODULE)
    try:
        version = md.version("flash-attn-4")
    except md.PackageNotFoundError:          # unpacked wheels on PYTHONPATH: no installed metadata
        version = getattr(mod, "__version__", "unknown")
    return mod.flash_attn_func, version


def _func():
    """FA4's ``flash_attn_func``, imported once; raises ``RuntimeError`` saying why it is not there."""
    if "func" not in _state:
        try:
            _state["func"], _state["version"] = _load()
        except Exception as exc:  # not installed, or its CUDA libraries do not load here
            _state["func"], _state["version"] = None, None
            detail = f": {str(exc).splitlines()[0][:200]}" if str(exc) else ""
            _state["why"] = (f"flash-attn-4 not importable ({type(exc).__name__}{detail}); optional: "
                             'pip install --pre flash-attn-4 ("flash-attn-4[cu13]" for a CUDA 13 torch; a Hopper '
                             "or Blackwell GPU)")
    if _state["func"] is None:
        raise RuntimeError(_state["why"])
    return _state["func"]


def reset() -> None:
    """Forget the import's outcome (tests, or after PYTHONPATH changed)."""
    _state.clear()


def available(device: str = "cuda") -> tuple[bool, str]:
    """(True, "flash-attn-4 VERSION") where FA4 imports and, for ``device`` "cuda", a CUDA GPU it has kernels for
    (sm90, sm100) is present; else (False, the reason, one line)."""
    try:
        _func()
    except RuntimeError as exc:
        return False, str(exc)
    if device == "cuda":
        import torch
        if not torch.cuda.is_available():
            return False, "flash-attn-4: no CUDA GPU"
        major, minor = torch.cuda.get_device_capability()
        if major not in (9, 10):
            return False, f"flash-attn-4: no kernels for sm{major}{minor} here (its sm90 and sm100 paths only)"
    return True, f"flash-attn-4 {_state['version']}"


def version() -> str | None:
    """FA4's version once imported, else None."""
    return _state.get("version")


def attention(q, k, v, causal: bool):
    """o = softmax(q k^T / sqrt(d)) v by FA4, (B, H, N, d) in and out (views, no copies); differentiable: with
    ``q.requires_grad`` its backward is FA4's backward."""
    fn = _func()
    o, _lse = fn(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), causal=causal)   # (B, N, H, d)
    return o.transpose(1, 2)                                                                # (B, H, N, d)


# --- compiling ahead: every kernel of a grid, in parallel processes, into FA4's disk cache --------------------------

def cache_env(cache_dir: str | None = None) -> dict:
    """The environment that turns FA4's persistent kernel cache on (in ``cache_dir``, default /tmp/fa4_cache)."""
    return {"FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED": "1",
            "FLASH_ATTENTION_CUTE_DSL_CACHE_DIR": cache_dir or os.environ.get("FLASH_ATTENTION_CUTE_DSL_CACHE_DIR",
                                                                           "/tmp/fa4_cache")}


def compile_one(dtype: str, d: int, causal: bool, n: int, tokens: int = 16384, width: int = 2048,
                device: str = "cuda") -> dict:
    """Run FA4's forward and backward once at one row's shape (B = tokens / n, H = width / d), and the course's
    kernels (Triton and Gluon, forward and backward) too, whose compiled kernels Triton keeps on disk as well:
    {"fa4_s", "course_s": seconds, "fa4_errors", "course_errors": what raised (FA4 absent, Gluon off Hopper)}."""
    import torch

    from flashsim import kernels
    B, H = max(1, tokens // n), max(1, width // d)
    q, k, v, do = (torch.randn(B, H, n, d, device=device, dtype=getattr(torch, dtype)) for _ in range(4))

    def fwd(fn):
        with torch.no_grad():
            fn(q, k, v, causal)

    def bwd(fn):
        xs = [x.detach().requires_grad_() for x in (q, k, v)]
        torch.autograd.grad(fn(*xs, causal), xs, do)

    steps = {"fa4": [(fwd, attention), (bwd, attention)], "course": []}
    for g in (False, True):
        steps["course"] += [(fwd, lambda q, k, v, c, g=g: kernels.flash_forward(q, k, v, causal=c, gluon=g)[0]),
                            (bwd, lambda q, k, v, c, g=g: kernels.attention(q, k, v, causal=c, gluon=g))]
    out = {}
    for name, todo in steps.items():
        t0, errors = time.time(), []
        for run, fn in todo:
            try:
                run(fn)
                if q.is_cuda:
                    torch.cuda.synchronize()
            except Exception as exc:  # the other steps still warm
                errors.append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}")
        out[f"{name}_s"], out[f"{name}_errors"] = round(time.time() - t0, 1), errors
    return out


def warm(n: int, dtypes=("float16", "bfloat16"), ds=(64, 128), jobs: int = 8, timeout_s: float = 300,
         cache_dir: str | None = None) -> list[dict]:
    """Compile FA4's forward and backward for every (dtype, d, causal) at N = n in ``jobs`` parallel processes
    (each process one shape), into the disk cache of :func:`cache_env`; returns each shape's seconds or error."""
    env = dict(os.environ, **cache_env(cache_dir))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(x for x in (root, env.get("PYTHONPATH")) if x)
    todo = [(dt, d, c) for dt in dtypes for d in ds for c in (False, True)]
    running, done = [], []
    t_end = time.time() + timeout_s
    while todo or running:
        while todo and len(running) < jobs:
            dt, d, c = todo.pop(0)
            cmd = [sys.executable, "-m", "benchmarks.gluon_bench.fa4", "--one", f"{dt},{d},{int(c)},{n}"]
            log = tempfile.TemporaryFile("w+")       # a file, not a pipe: a chatty compile never blocks on it
            running.append(((dt, d, c), subprocess.Popen(cmd, env=env, cwd=root, stdout=log,
                                                         stderr=subprocess.STDOUT, text=True), log))
        time.sleep(0.5)
        for item in list(running):
            (dt, d, c), p, log = item
            if p.poll() is None and time.time() < t_end:
                continue
            if p.poll() is None:
                p.kill()
                p.wait()
            log.seek(0)
            out = log.read()
            log.close()
            last = out.strip().splitlines()[-1] if out.strip() else ""
            rec = dict(dtype=dt, d=d, causal=c, n=n, rc=p.returncode)
            if p.returncode == 0 and last.startswith("compiled "):
                rec.update(json.loads(last[len("compiled "):]))
            else:
                rec["error"] = out.strip()[-600:]
            done.append(rec)
            running.remove(item)
    return done


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--warm", action="store_true",
                    help="compile the grid's kernels (FA4's, the course's) into their disk caches, in parallel")
    ap.add_argument("--one", metavar="DTYPE,D,CAUSAL,N", help="(a --warm child) compile one shape")
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--timeout-s", type=float, default=300)
    args = ap.parse_args(argv)
    if args.one:
        dt, d, c, n = args.one.split(",")
        print("compiled " + json.dumps(compile_one(dt, int(d), c == "1", int(n))))
        return 0
    if args.warm:
        print(available()[1], flush=True)         # without FA4 the course's kernels still warm
        t0 = time.time()
        for rec in warm(args.n, jobs=args.jobs, timeout_s=args.timeout_s):
            print("fa4 warm", rec, flush=True)
        print(f"fa4 warm: {time.time() - t0:.0f} s", flush=True)
        return 0
    ap.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
