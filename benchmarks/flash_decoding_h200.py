"""Flash-decoding on the H200: the split-KV kernel vs the same kernel without the split (chapter 13).

On the GPU machine (imports torch, triton, numpy):

    PYTHONPATH=$PWD python benchmarks/flash_decoding_h200.py --out $OUT

Batch 1, one query row (Nq = 1), N = 65536 keys, d = 128, fp16. For H in {1, 8, 16, 32} heads:
flashsim.kernels.split_kv.split_kv_attention with num_splits=1 (one program per head streams all 64k keys) and
with the default split (about two programs per SM), timed with triton.testing.do_bench; the ratio, the error of
each against the float64 reference (flashsim.model.attention.reference, on the host), the requested bytes
(flashsim.model.multi.closed_forms.split_kv_bytes) and the implied bandwidth. Then, at H = 16, a sweep of num_splits.

Writes <out>/flash_decoding_h200.json and prints a short table last. ``--small`` runs the interpreter at small
sizes (a smoke test; times there mean nothing).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HERE)

from flashsim.kernels import INTERPRETER  # noqa: E402  (chooses GPU or interpreter before triton is imported)
from flashsim.kernels.split_kv import default_num_splits, split_kv_attention, split_plan  # noqa: E402
from flashsim.measure.provenance import run_info  # noqa: E402
from flashsim.model.attention.reference import reference_attention  # noqa: E402
from flashsim.model.multi.closed_forms import split_kv_total_bytes  # noqa: E402


def versions() -> dict:
    return run_info("PYTHONPATH=$PWD python benchmarks/flash_decoding_h200.py --out $OUT")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=".")
    ap.add_argument("--small", action="store_true")
    args = ap.parse_args()
    import torch
    gpu = not INTERPRETER and not args.small
    dev = "cuda" if gpu else "cpu"
    n, d = (65536, 128) if gpu else (1024, 32)
    heads_list = [1, 8, 16, 32] if gpu else [1, 2]
    num_sms = torch.cuda.get_device_properties(0).multi_processor_count if gpu else 4
    block_n = 64 if gpu else 32

    def timeit(fn):
        if gpu:
            import triton.testing
            return triton.testing.do_bench(fn, warmup=25, rep=100) * 1e-3
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    result = {"versions": versions(), "n": n, "d": d, "batch": 1, "nq": 1, "dtype": "fp16", "rows": [], "sweep": []}
    print(json.dumps(result["versions"]), flush=True)
    g = torch.Generator().manual_seed(0)
    for heads in heads_list:
        q, k, v = (torch.randn(1, heads, m, d, generator=g).half().to(dev) for m in (1, n, n))
        # the one float64 reference on the host (Nq = 1: H·N scores, cheap), (1, H, 1, d) on the device
        ref = torch.from_numpy(reference_attention(*(x.double().cpu().numpy() for x in (q, k, v)))).to(dev)
        splits = default_num_splits(heads, n, num_sms=num_sms, block_n=block_n)
        row = {"heads": heads, "splits": splits}
        for label, s in (("nosplit", 1), ("split", splits)):
            o, _ = split_kv_attention(q, k, v, num_splits=s, block_n=block_n)
            row[f"{label}_err"] = float((o.float() - ref).abs().max())
            row[f"{label}_s"] = timeit(lambda: split_kv_attention(q, k, v, num_splits=s, block_n=block_n))
            eff = split_plan(n, s, block_n)[1]               # chunks are whole tiles: the splits that run
            row[f"{label}_effective_splits"] = eff
            row[f"{label}_bytes"] = split_kv_total_bytes(n, d, eff, 1, heads, 1, "fp16")
            row[f"{label}_gb_per_s"] = row[f"{label}_bytes"] / row[f"{label}_s"] / 1e9
        row["speedup"] = row["nosplit_s"] / row["split_s"]
        result["rows"].append(row)
        print(json.dumps(row), flush=True)
        if heads == (16 if gpu else 2):
            for s in ([1, 2, 4, 8, 16, 32, 64] if gpu else [1, 4]):
                t = timeit(lambda: split_kv_attention(q, k, v, num_splits=s, block_n=block_n))
                result["sweep"].append({"heads": heads, "splits": s, "seconds": t,
                                        "effective_splits": split_plan(n, s, block_n)[1],
                                        "bytes": split_kv_total_bytes(n, d, split_plan(n, s, block_n)[1], 1, heads,
                                                                      1, "fp16")})
        del q, k, v, ref
    path = os.path.join(args.out, "flash_decoding_h200.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    print(f"\nwrote {path}\n")
    print(f"flash-decoding, batch 1, Nq=1, N={n}, d={d}, fp16 ({result['versions'].get('gpu', 'CPU interpreter')})")
    print(f"{'H':>3} {'splits':>6} {'no split us':>12} {'split us':>10} {'ratio':>7} {'GB/s split':>10} {'err':>9}")
    for r in result["rows"]:
        print(f"{r['heads']:>3} {r['splits']:>6} {r['nosplit_s'] * 1e6:>12.1f} {r['split_s'] * 1e6:>10.1f} "
              f"{r['speedup']:>7.2f} {r['split_gb_per_s']:>10.0f} {max(r['split_err'], r['nosplit_err']):>9.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
