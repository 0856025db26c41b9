"""Ring attention on 2 GPUs with NCCL: bytes sent per device next to the simulator's link bytes (chapter 13).

On the 2-GPU machine (imports torch, triton, numpy; pynvml for the NVLink counter where present):

    PYTHONPATH=$PWD python benchmarks/distributed_h200.py --out $OUT

1. check: N=4096, H=4, d=128, fp16, causal and not; each block computed by flashsim.kernels.flash_forward;
   output gathered and compared with one-device float64 attention (in the parent, on the CPU).
2. size: B=1, H=16, N=65536, d=128, fp16 (32768 rows per GPU, 256 MiB per K/V message), causal and not, one
   warm-up pass; bytes sent per device (handed to NCCL), the NVLink TX counter where NVML exposes it, and time.
3. links alone: the same messages moved without computing (achieved link bandwidth).

Writes <out>/distributed_h200.json and prints a short table last. Without GPUs (``--small``) it runs the same
with gloo on 2 CPU processes at small sizes.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HERE)

from flashsim.measure.provenance import run_info  # noqa: E402
from flashsim.model.multi.closed_forms import ring_message_bytes  # noqa: E402
from flashsim.distributed.ring import run_ring  # noqa: E402


def versions() -> dict:
    return run_info("PYTHONPATH=$PWD python benchmarks/distributed_h200.py --out $OUT")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=".")
    ap.add_argument("--small", action="store_true", help="gloo on 2 CPU processes at small sizes")
    args = ap.parse_args()
    import torch
    gpu = torch.cuda.is_available() and torch.cuda.device_count() >= 2 and not args.small
    backend = "nccl" if gpu else "gloo"
    result = {"versions": versions(), "backend": backend, "runs": []}
    print(json.dumps(result["versions"]), flush=True)
    plan = ([("check", dict(heads=4, n=4096, d=128, check=True, warmup=1)),
             ("size", dict(heads=16, n=65536, d=128, check=False, warmup=1, comm_only=(False, True)))] if gpu else
            [("check", dict(heads=2, n=256, d=32, check=True)),
             ("size", dict(heads=2, n=1024, d=32, check=False, comm_only=(False, True)))])
    path = os.path.join(args.out, "distributed_h200.json")
    for label, kw in plan:
        t0 = time.time()
        try:
            runs = run_ring(world=2, batch=1, dtype="fp16", causal=(False, True), backend=backend,
                            use_triton=gpu, timeout_s=200, **kw)
        except Exception as exc:  # keep what the other parts measured
            result["runs"].append({"label": label, "error": f"{type(exc).__name__}: {exc}"})
            print(f"{label}: {type(exc).__name__}: {exc}", flush=True)
            continue
        for r in runs:
            d = r.as_dict()
            d["label"] = label + ("_links" if r.comm_only else "")
            d["wall_s"] = time.time() - t0
            msg = ring_message_bytes(r.n, r.d, r.world, r.heads, r.batch, r.dtype)
            d["message_bytes"] = msg
            if r.comm_only and not r.causal:
                d["link_bytes_per_s"] = msg / max(r.seconds)   # one message per direction per rank, in parallel
            result["runs"].append(d)
        print(f"{label}: done in {time.time() - t0:.1f} s", flush=True)
        with open(path, "w") as f:        # after each part: a later failure keeps what was measured
            json.dump(result, f, indent=1, default=str)
    print(f"\nwrote {path}\n")
    print(f"{'run':<11} {'causal':<6} {'rank':>4} {'sent bytes':>12} {'simulated':>12} {'diff':>7} "
          f"{'NVLink/OS':>12} {'ms':>8} {'max err':>9}")
    for d in result["runs"]:
        if "error" in d:
            print(f"{d['label']:<11} ERROR {d['error'][:100]}")
            continue
        for rank in range(d["world"]):
            sent, sim = d["sent_bytes"][rank], d["simulated_bytes"][rank]
            diff = (sent - sim) / sim if sim else (0.0 if sent == 0 else float("inf"))
            nv = d["nvlink_bytes"][rank] if d["nvlink_bytes"][rank] is not None else d["os_bytes"][rank]
            err = d["max_abs_err"]
            print(f"{d['label']:<11} {str(d['causal']):<6} {rank:>4} {sent:>12,} {sim:>12,} {diff:>+7.1%} "
                  f"{(f'{nv:,}' if nv is not None else '-'):>12} {d['seconds'][rank] * 1e3:>8.2f} "
                  f"{(f'{err:.2e}' if err is not None else '-'):>9}")
        if d.get("link_bytes_per_s"):
            print(f"{'':<11} links alone: {d['link_bytes_per_s'] / 1e9:.1f} GB/s per direction")
    return 0


if __name__ == "__main__":
    sys.exit(main())
