"""Chapter 10 benchmark: the numba FlashAttention kernel against naive numpy and torch's CPU SDPA, on this CPU.

Run from the repository root (unset OpenBLAS's core override for this command only, so numpy's BLAS runs the
kernel it would pick by itself; see the note in the JSON):

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/cpu_speed.py

It checks each implementation against a float64 reference first, then times them side by side in one run: each
repetition calls every implementation once, in turn, so background load hits all of them alike, and the table
reports the median over repetitions (after warm-up calls, which include numba's compilation). Then it sweeps
block_c at N=4096 to show time against the per-step working set, with the L1d and L2 (the CPU's "SRAM") sizes
marked. The machine may be shared: each row records how many cores other processes kept busy meanwhile, and
--wait-quiet SECONDS first waits for an idle moment.
Writes benchmarks/results/cpu_speed_<date>.json and figures/cpu_speed.png.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flashsim.cpu import (  # noqa: E402
    TILE_COLS,
    default_blocks,
    effective_blocks,
    flash_attention_cpu,
    naive_attention_numpy,
)
from flashsim.course.result_figures import cpu_speed as plot  # noqa: E402  (figures/cpu_speed.png)
from flashsim.model.attention.reference import reference_attention  # noqa: E402
from flashsim.model.hardware import get_device  # noqa: E402

KiB = 1024


def cache_bytes(level: int) -> int | None:
    """Data (or unified) cache size at `level` for cpu0, from sysfs; None when unreadable."""
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    try:
        for entry in sorted(base.glob("index*")):
            if int((entry / "level").read_text()) == level and \
                    (entry / "type").read_text().strip() in ("Data", "Unified"):
                text = (entry / "size").read_text().strip().upper()
                scale = {"K": KiB, "M": KiB * KiB}.get(text[-1], 1)
                return int(text.rstrip("KM")) * scale
    except (OSError, ValueError):
        return None
    return None


def blas_info() -> dict:
    """Which OpenBLAS numpy loaded and which core kernel it runs (what OPENBLAS_CORETYPE changes)."""
    import ctypes

    info = {"OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),
            "OPENBLAS_L2_SIZE": os.environ.get("OPENBLAS_L2_SIZE")}
    try:
        with open("/proc/self/maps") as f:
            libs = sorted({line.split()[-1] for line in f if "openblas" in line.lower() and ".so" in line})
        for lib in libs:
            handle = ctypes.CDLL(lib)
            for name in ("scipy_openblas_get_corename64_", "openblas_get_corename64_", "openblas_get_corename"):
                fn = getattr(handle, name, None)
                if fn is not None:
                    fn.restype = ctypes.c_char_p
                    info["numpy_openblas"] = os.path.basename(lib)
                    info["numpy_openblas_core"] = fn().decode()
                    break
    except OSError:
        pass
    return info


def _jiffies():
    """(busy jiffies of the whole machine, jiffies of this process and its threads)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    busy = sum(fields) - fields[3] - (fields[4] if len(fields) > 4 else 0)  # minus idle and iowait
    with open("/proc/self/stat") as f:
        own = f.read().rsplit(")", 1)[1].split()
    return busy, int(own[11]) + int(own[12])  # utime + stime


class OtherLoad:
    """Cores kept busy by other processes while a block of code runs (the machine is shared with other work)."""

    def __enter__(self):
        self.t0, self.j0 = time.perf_counter(), _jiffies()
        return self

    def __exit__(self, *exc):
        busy, own = (b - a for a, b in zip(self.j0, _jiffies()))
        self.cores = max(0.0, (busy - own) / os.sysconf("SC_CLK_TCK") / (time.perf_counter() - self.t0))


def wait_until_quiet(max_wait_s, threshold_cores=0.3, window_s=2.0):
    """Wait (up to max_wait_s) for a window in which other processes use fewer than threshold_cores cores."""
    deadline = time.time() + max_wait_s
    while True:
        with OtherLoad() as load:
            time.sleep(window_s)
        if load.cores < threshold_cores or time.time() > deadline:
            return load.cores


def implementations():
    import torch

    def torch_sdpa(q, k, v):
        qt, kt, vt = (torch.from_numpy(x)[None, None] for x in (q, k, v))
        with torch.no_grad():
            return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt)[0, 0].numpy()

    return {
        "flash (numba)": lambda q, k, v: flash_attention_cpu(q, k, v),
        "naive numpy": naive_attention_numpy,
        "torch SDPA": torch_sdpa,
    }


def timed(fn, *args) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def run_speed(ns, d, reps, warmup, rounds, progress, settle_s=0.3):
    impls = implementations()
    rows = []
    for n in ns:
        rng = np.random.default_rng(n)
        q, k, v = (rng.standard_normal((n, d), dtype=np.float32) for _ in range(3))
        want = reference_attention(q, k, v) if n <= 4096 else None  # the one float64 reference (the model's)
        errors = {}
        for name, fn in impls.items():
            for _ in range(warmup):
                out = fn(q, k, v)
            if want is not None:
                errors[name] = float(np.abs(out - want).max())
        # rounds of consecutive calls per implementation, the order rotated each round: background load is shared
        # out alike, and one library's idle worker threads (torch's OpenMP pool, OpenBLAS's), which spin for a while
        # after their own call, do not land inside another library's timings (a pause, then one untimed call)
        times = {name: [] for name in impls}
        names = list(impls)
        load = OtherLoad().__enter__()
        per_round = max(1, reps // rounds)
        for rnd in range(rounds):
            for name in names[rnd % len(names):] + names[:rnd % len(names)]:
                fn = impls[name]
                time.sleep(settle_s)  # let the previous library's worker threads stop spinning (OpenBLAS: ~0.1 s)
                fn(q, k, v)
                for _ in range(per_round):
                    times[name].append(timed(fn, q, k, v))
                    progress.update(1)
        load.__exit__()
        med = {name: float(np.median(t)) for name, t in times.items()}
        flops = 4.0 * n * n * d
        rows.append({
            "N": n, "d": d, "blocks": list(effective_blocks(*default_blocks(d))),
            "median_ms": {name: 1e3 * t for name, t in med.items()},
            "min_ms": {name: 1e3 * min(t) for name, t in times.items()},
            "gflops": {name: flops / t / 1e9 for name, t in med.items()},
            "max_abs_error_vs_float64": errors,
            "speedup_vs_naive": med["naive numpy"] / med["flash (numba)"],
            "speed_vs_torch": med["torch SDPA"] / med["flash (numba)"],
            "other_processes_busy_cores": round(load.cores, 2),
        })
    return rows


def working_set_bytes(block_r, block_c, d):
    """Bytes one inner step touches: Q block + accumulator, K and V blocks, the S tile (float32)."""
    br, bc = effective_blocks(block_r, block_c)
    dp = -(-d // TILE_COLS) * TILE_COLS
    return 4 * (2 * br * dp + 2 * bc * dp + br * bc)


def run_sweep(n, d, block_rs, block_cs, reps, progress):
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((n, d), dtype=np.float32) for _ in range(3))
    points = []
    for br in block_rs:
        for bc in block_cs:
            flash_attention_cpu(q, k, v, block_r=br, block_c=bc)
            t = [timed(flash_attention_cpu, q, k, v, None, None, br, bc) for _ in range(reps)]
            progress.update(1)
            points.append({"block_r": br, "block_c": bc, "working_set_bytes": working_set_bytes(br, bc, d),
                           "median_ms": 1e3 * float(np.median(t))})
    return points


def print_table(rows):
    head = f"{'N':>6} | {'flash ms':>9} | {'naive ms':>9} | {'torch ms':>9} | {'naive/flash':>11} | " \
           f"{'flash speed/torch':>17} | {'flash GFLOP/s':>13} | {'max err':>8} | {'other load':>10}"
    print(head)
    print("-" * len(head))
    for r in rows:
        m = r["median_ms"]
        print(f"{r['N']:>6} | {m['flash (numba)']:>9.2f} | {m['naive numpy']:>9.2f} | {m['torch SDPA']:>9.2f} | "
              f"{r['speedup_vs_naive']:>10.2f}x | {r['speed_vs_torch']:>16.2f}x | "
              f"{r['gflops']['flash (numba)']:>13.1f} | "
              f"{r['max_abs_error_vs_float64'].get('flash (numba)', 0):>8.1e} | "
              f"{r['other_processes_busy_cores']:>5.2f} cores")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ns", type=int, nargs="+", default=[512, 1024, 2048, 4096])
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3, help="the repetitions are split into this many rounds")
    parser.add_argument("--sweep-n", type=int, default=4096)
    parser.add_argument("--sweep-block-r", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--sweep-block-c", type=int, nargs="+",
                        default=[16, 32, 64, 128, 256, 512, 640, 1024, 2048, 4096])
    parser.add_argument("--sweep-reps", type=int, default=5)
    parser.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS",
                        help="first wait up to this long for other processes to leave the cores idle")
    parser.add_argument("--out", type=Path, default=None, help="JSON path (default benchmarks/results/...)")
    parser.add_argument("--figure", type=Path, default=ROOT / "figures" / "cpu_speed.png")
    args = parser.parse_args(argv)

    import numba
    import torch
    from tqdm import tqdm

    hw = get_device("cpu")
    other_before = wait_until_quiet(args.wait_quiet) if args.wait_quiet > 0 else None
    load_before = os.getloadavg()
    total = (len(args.ns) * max(1, args.reps // args.rounds) * args.rounds * 3
             + len(args.sweep_block_r) * len(args.sweep_block_c))
    with tqdm(total=total, desc="cpu_speed", unit="run") as bar:
        speed = run_speed(args.ns, args.d, args.reps, args.warmup, args.rounds, bar)
        sweep_points = run_sweep(args.sweep_n, args.d, args.sweep_block_r, args.sweep_block_c, args.sweep_reps, bar)
    now = dt.datetime.now(dt.timezone.utc)
    cpu_name = platform.processor() or "cpu"
    try:
        with open("/proc/cpuinfo") as f:
            cpu_name = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    result = {
        "benchmark": "cpu_speed (chapter 10): flash_attention_cpu vs naive numpy vs torch CPU SDPA",
        "date": now.isoformat(timespec="seconds"),
        "command": " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv]),
        "machine": {"cpu": cpu_name, "cpu_short": f"{cpu_name}, {os.cpu_count()} cores", "cores": os.cpu_count(),
                    "l1d_bytes": cache_bytes(1), "l2_bytes_per_core": hw.sram_bytes, "llc_bytes": hw.l2_bytes,
                    "platform": platform.platform(), "load_average_before": load_before,
                    "other_processes_busy_cores_before": other_before,
                    "load_average_after": os.getloadavg()},
        "versions": {"python": platform.python_version(), "numpy": np.__version__, "numba": numba.__version__,
                     "torch": torch.__version__},
        "threads": {"numba": numba.get_num_threads(), "torch": torch.get_num_threads(),
                    "numba_threading_layer": numba.threading_layer()},
        "blas": blas_info(),
        "method": f"median of {args.reps} timed calls per implementation after {args.warmup} warm-up calls, in "
                  f"{args.rounds} rounds of consecutive calls (order rotated each round; before each run of calls "
                  "a 0.3 s pause, for the other libraries' worker threads to stop spinning, and one untimed call); single head, float32, non-causal; FLOPs = 4 N^2 d. The machine is shared: "
                  "load_average_before/after say how busy it was",
        "speed": speed,
        "block_sweep": {"N": args.sweep_n, "d": args.d, "l1d_bytes": cache_bytes(1), "l2_bytes": hw.sram_bytes,
                        "default_blocks": list(default_blocks(args.d)), "points": sweep_points},
    }
    out = args.out or ROOT / "benchmarks" / "results" / f"cpu_speed_{now:%Y-%m-%d}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    plot(result, args.figure)
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out} and "
          f"{args.figure.relative_to(ROOT) if args.figure.is_relative_to(ROOT) else args.figure}")
    print("block sweep (N=%d): " % args.sweep_n + ", ".join(
        f"{p['block_r']}x{p['block_c']}: {p['median_ms']:.1f} ms" for p in sweep_points))
    print_table(speed)
    return result


if __name__ == "__main__":
    main()
