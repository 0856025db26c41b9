"""Chapters 06 and 10: peak memory of naive attention against FlashAttention as N grows, measured.

    .venv/bin/python benchmarks/peak_memory.py            # CPU here; adds a GPU table when CUDA is present

CPU (float32, one head, d=64), each number the peak growth of memory during one call:
* naive numpy (S materialized) and flash_attention_cpu (numba): tracemalloc, which sees every numpy buffer (the
  flash kernel allocates all its arrays with numpy for this reason);
* torch naive (softmax(q k^T) v) and torch SDPA: torch's CPU allocator is invisible to tracemalloc, so these use
  the process's peak RSS (VmHWM after resetting it through /proc/self/clear_refs), each in a fresh subprocess so
  memory that an earlier call freed cannot be silently reused. Page-granular; fine at these sizes.
GPU (when present; fp16, batch 1, 8 heads, d=64): torch.cuda.max_memory_allocated after
reset_peak_memory_stats, for naive PyTorch attention and SDPA (flash backend).

Writes benchmarks/results/cpu_peak_memory_<date>.json and figures/peak_memory_cpu.png.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flashsim.cpu import flash_attention_cpu, flash_extra_bytes, naive_attention_numpy  # noqa: E402
from flashsim.course.result_figures import peak_memory as plot  # noqa: E402  (figures/peak_memory_cpu.png)
from flashsim.measure.peak_memory import peak_memory_cpu, peak_memory_gpu  # noqa: E402

MiB = 1024 * 1024

_TORCH_CHILD = r"""
import sys, torch
sys.path.insert(0, sys.argv[4])
from flashsim.measure.peak_memory import peak_memory_cpu
n, d, which = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
g = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(1, 1, n, d, generator=g) for _ in range(3))
def naive(q, k, v):
    s = (q @ k.transpose(-1, -2)) * d ** -0.5
    return torch.softmax(s, dim=-1) @ v
def sdpa(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v)
fn = naive if which == "naive" else sdpa
with torch.no_grad():
    fn(q[..., :64, :], k[..., :64, :], v[..., :64, :])
    print(peak_memory_cpu(fn, q, k, v, method="rss"))
"""


def torch_cpu_peak(n, d, which):
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_=str(1 << 20))  # big buffers straight from the OS, back on free
    res = subprocess.run([sys.executable, "-c", _TORCH_CHILD, str(n), str(d), which, str(ROOT)],
                         capture_output=True, text=True, env=env, check=True)
    return int(res.stdout.strip().splitlines()[-1])


def run_cpu(ns, d, budget_bytes, progress):
    rows = []
    flash_attention_cpu(*(np.zeros((64, d), np.float32) for _ in range(3)))  # compile outside the measurement
    for n in ns:
        rng = np.random.default_rng(n)
        q, k, v = (rng.standard_normal((n, d), dtype=np.float32) for _ in range(3))
        naive_fits = 3 * 4 * n * n <= budget_bytes  # S, plus the torch softmax copy, plus slack
        row = {"N": n, "d": d, "output_bytes": q.nbytes, "naive_S_bytes": 4 * n * n,
               "flash_predicted_extra_bytes": flash_extra_bytes(n, d)}
        row["flash (numba)"] = peak_memory_cpu(flash_attention_cpu, q, k, v)
        progress.update(1)
        row["naive numpy"] = peak_memory_cpu(naive_attention_numpy, q, k, v) if naive_fits else None
        progress.update(1)
        row["torch naive"] = torch_cpu_peak(n, d, "naive") if naive_fits else None
        progress.update(1)
        row["torch SDPA"] = torch_cpu_peak(n, d, "sdpa")
        progress.update(1)
        rows.append(row)
    return rows


def run_gpu(ns, d, heads, progress):
    import torch

    if not torch.cuda.is_available():
        return None
    free, total = torch.cuda.mem_get_info()
    rows = []
    for n in ns:
        q, k, v = (torch.randn(1, heads, n, d, device="cuda", dtype=torch.float16) for _ in range(3))

        def naive(q, k, v):
            return torch.softmax((q @ k.transpose(-1, -2)) * d ** -0.5, dim=-1) @ v

        def sdpa(q, k, v):
            from torch.nn.attention import SDPBackend, sdpa_kernel

            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                return torch.nn.functional.scaled_dot_product_attention(q, k, v)

        row = {"N": n, "heads": heads, "d": d, "dtype": "float16", "output_bytes": q.numel() * 2,
               "naive_S_bytes": 2 * heads * n * n}
        fits = 3 * row["naive_S_bytes"] < 0.8 * free
        with torch.no_grad():
            row["torch naive"] = peak_memory_gpu(naive, q, k, v) if fits else None
            row["torch SDPA (flash)"] = peak_memory_gpu(sdpa, q, k, v)
        progress.update(1)
        rows.append(row)
        del q, k, v
    return {"device": torch.cuda.get_device_name(), "total_bytes": total, "rows": rows}


def fmt(x):
    return "-" if x is None else f"{x / MiB:10.1f}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ns", type=int, nargs="+", default=[512, 1024, 2048, 4096, 8192, 16384, 32768])
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--budget-gib", type=float, default=6.0, help="skip naive runs whose S would exceed this")
    parser.add_argument("--gpu-ns", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384, 32768])
    parser.add_argument("--gpu-heads", type=int, default=8)
    parser.add_argument("--no-gpu", action="store_true")
    parser.add_argument("--gpu-json", type=Path, default=None,
                        help="no GPU here: take the GPU table from this earlier results file (a run on a GPU machine)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--figure", type=Path, default=ROOT / "figures" / "peak_memory_cpu.png")
    args = parser.parse_args(argv)

    import numba
    import torch
    from tqdm import tqdm

    gpu = torch.cuda.is_available() and not args.no_gpu
    total = 4 * len(args.ns) + (len(args.gpu_ns) if gpu else 0)
    with tqdm(total=total, desc="peak_memory", unit="call") as bar:
        cpu_rows = run_cpu(args.ns, args.d, args.budget_gib * 1024 * MiB, bar)
        gpu_result = run_gpu(args.gpu_ns, args.d, args.gpu_heads, bar) if gpu else None
    now = dt.datetime.now(dt.timezone.utc)
    if gpu_result is not None:
        gpu_result["date"] = now.isoformat(timespec="seconds")
    elif args.gpu_json is not None:
        gpu_result = json.loads(args.gpu_json.read_text())["gpu"]
        gpu_json = args.gpu_json.resolve()
        gpu_result["from_file"] = str(gpu_json.relative_to(ROOT) if gpu_json.is_relative_to(ROOT) else gpu_json)
    result = {
        "benchmark": "peak_memory (chapters 06, 10): naive vs flash attention, peak memory growth per call",
        "date": now.isoformat(timespec="seconds"),
        "command": " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv]),
        "machine": {"platform": platform.platform(), "cores": os.cpu_count(), "processor": platform.processor()},
        "versions": {"python": platform.python_version(), "numpy": np.__version__, "numba": numba.__version__,
                     "torch": torch.__version__},
        "method": {"numpy and numba": "tracemalloc peak minus traced memory before the call",
                   "torch CPU": "peak RSS (VmHWM reset via /proc/self/clear_refs) minus RSS before, in a fresh "
                                "subprocess with MALLOC_MMAP_THRESHOLD_=1MiB",
                   "GPU": "torch.cuda.max_memory_allocated after reset_peak_memory_stats, minus allocated before"},
        "cpu": cpu_rows,
        "gpu": gpu_result,
    }
    out = args.out or ROOT / "benchmarks" / "results" / f"cpu_peak_memory_{now:%Y-%m-%d}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    plot(result, args.figure)
    print(f"wrote {out} and {args.figure}")
    print("CPU, peak memory growth per call (MiB), float32, d=%d:" % args.d)
    print(f"{'N':>6} | {'naive numpy':>11} | {'torch naive':>11} | {'flash numba':>11} | {'torch SDPA':>10} | "
          f"{'N x N S':>9} | {'naive/flash':>11}")
    for r in cpu_rows:
        ratio = "-" if not r["naive numpy"] else f"{r['naive numpy'] / r['flash (numba)']:10.1f}x"
        print(f"{r['N']:>6} | {fmt(r['naive numpy']):>11} | {fmt(r['torch naive']):>11} | "
              f"{fmt(r['flash (numba)']):>11} | {fmt(r['torch SDPA']):>10} | {fmt(r['naive_S_bytes']):>9} | "
              f"{ratio:>11}")
    if gpu_result:
        print(f"GPU {gpu_result['device']}, fp16, {args.gpu_heads} heads, d={args.d} (MiB):")
        for r in gpu_result["rows"]:
            print(f"{r['N']:>6} | naive {fmt(r['torch naive'])} | SDPA flash {fmt(r['torch SDPA (flash)'])}")
    return result


if __name__ == "__main__":
    main()
