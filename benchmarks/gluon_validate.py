"""Correctness grid and timing of the Gluon Hopper forward (flashsim.kernels.gluon), for a Hopper GPU.

Correctness first: for each case, fresh random inputs (never zeros), outputs NaN-poisoned before the launch
(FLASHSIM_POISON=1), and the error of ``o`` against the float64 reference must be at most 2x the error of PyTorch's
own SDPA in the same dtype (plus a floor of 1e-6); lse is checked against the float64 logsumexp. The reference is
the one in flashsim.model.attention.reference, computed on the host in row chunks (memory O(chunk·N); a timed
row's slice, at most 2^28 scores, takes a few seconds there).
Then speed: ``triton.testing.do_bench`` medians, side by side in one process, of cuDNN
(``sdpa_kernel(SDPBackend.CUDNN_ATTENTION)``), SDPA's FlashAttention-2 backend, the course's Triton kernel
(``flashsim.kernels.flash_forward``) and the Gluon kernel, at B*N = 16384 and H*d = 2048. Timed rows are checked
for correctness too, on their own inputs, before they are timed.

    python3 benchmarks/gluon_validate.py --out $OUT/gluon_fwd.json [--quick] [--ablation] [--tune]
    python3 benchmarks/gluon_validate.py --bwd --out $OUT/gluon_bwd.json [--tune] [--fwd-by-n]

``--bwd``: the same for the Gluon backward (:func:`flashsim.kernels.gluon.gluon_backward`): gradients of random
inputs against the float64 reference (the grid) or float64 torch on the GPU (each timed row, on one head), each
within 2x the error of PyTorch's SDPA gradients in the same dtype; then the backward pass alone timed side by side
with cuDNN's, SDPA FlashAttention-2's (``torch.autograd.grad`` on a saved graph) and the course's Triton kernels
(``flash_backward(gluon=False)``). ``--tune`` first times the candidate backward configurations
(:data:`BWD_CANDIDATES`, each checked on ragged N first); ``--fwd-by-n`` times forward configurations per N
(:data:`FWD_BY_N_CANDIDATES`) before the table.

``--tune`` first times each candidate launch configuration (:data:`CANDIDATES`, each checked for correctness on
ragged N first) in fp16 at N = 2048 and 16384, and keeps the fastest (geometric mean) per (d, causal) for the rest
of the run. ``--ncu SHAPE`` runs one forward of one shape only, for ``ncu`` (dtype,d,causal,N, e.g. fp16,128,0,2048).

Only ``flashsim.kernels.gluon`` (and, for the Triton column, ``flashsim.kernels``) and the numpy-only reference
``flashsim.model.attention.reference`` are imported; if ``flashsim.kernels`` fails to import, the Gluon files are
loaded straight from their paths.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("FLASHSIM_POISON", "1")
sys.path.insert(0, str(ROOT))

# the parts, one concern per module (benchmarks/gluon_bench); the names other scripts and tests use are re-exported
from benchmarks.gluon_bench import timing  # noqa: E402
from benchmarks.gluon_bench.backward import (BWD_CANDIDATES, FWD_BY_N_CANDIDATES, FWD_ROW_CANDIDATES,  # noqa: E402,F401
                                             apply_fwd_adopted, bwd_main, entry_overrides)
from benchmarks.gluon_bench.checks import check_backward_on_lse, check_case, check_bwd_case  # noqa: E402,F401
from benchmarks.gluon_bench.forward import CANDIDATES, print_table, time_row, tune  # noqa: E402,F401
from benchmarks.gluon_bench.loading import (load_gluon, load_gluon_files, load_triton_forward,  # noqa: E402,F401
                                            versions)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--quick", action="store_true", help="fewer correctness cases and timed rows")
    ap.add_argument("--ablation", action="store_true", help="also time the kernel with ping-pong off (fp16 rows)")
    ap.add_argument("--no-timing", action="store_true")
    ap.add_argument("--warmup", type=int, default=25)
    ap.add_argument("--rep", type=int, default=100)
    ap.add_argument("--ns", default="2048,4096,8192,16384")
    ap.add_argument("--tune", action="store_true", help="pick the launch configuration per (d, causal) first")
    ap.add_argument("--ncu", default=None, help="dtype,d,causal,N: run that forward (warm-up, then once) and exit")
    ap.add_argument("--ncu-config", default=None,
                    help="with --ncu: JSON forward configuration overrides; that forward is profiled too, after the "
                         "committed one (same inputs, same process)")
    ap.add_argument("--no-triton", action="store_true", help="with --bwd: no Triton column (fewer compiles)")
    ap.add_argument("--bwd", action="store_true", help="the backward: correctness grid, tuning, timing table")
    ap.add_argument("--fwd-by-n", action="store_true", help="with --bwd: time forward configurations per N first")
    ap.add_argument("--ncu-bwd", default=None,
                    help="dtype,d,causal,N: run that backward (ours, cuDNN's and, where it imports, FA4's; warm-up, "
                         "then once)")
    ap.add_argument("--grid", default="bwd,fwd", help="with --bwd: which kernels the correctness grid checks")
    ap.add_argument("--bwd-override", default=None,
                    help="with --bwd: JSON overrides applied to every BWD_CONFIGS entry before the grid, or "
                         "{\"d64_causal0\": {...}, ...} for named entries only (an entry whose grid cases fail goes "
                         "back to the committed one); the committed configurations are then timed in each row too "
                         "(gluon_committed), for a same-run comparison")
    ap.add_argument("--ds", default="64,128", help="with --bwd: the head dims of the timed rows")
    ap.add_argument("--causals", default="0,1", help="with --bwd: the masks of the timed rows (0 none, 1 causal)")
    ap.add_argument("--fwd-beside", default=None,
                    help='with --bwd: {"d128_causal1": {...}, ...}: each timed row of those entries also times the '
                         "forward with these overrides (gluon_committed_fwd), e.g. a feature switched off")
    ap.add_argument("--fwd-override", default=None,
                    help='with --bwd: {"d128_causal1": {...}, ...} JSON overrides of FWD_CONFIGS entries before the '
                         "grid; each timed row then times the forward configuration they replace beside them")
    ap.add_argument("--dtypes", default="fp16,bf16", help="with --bwd: the dtypes of the timed rows")
    ap.add_argument("--triton-bwd-dtypes", default="fp16",
                    help="with --bwd: the dtypes whose rows also time the Triton backward (fewer compiles: fp16)")
    ap.add_argument("--rounds", type=int, default=timing.ROUNDS,
                    help="interleaved timing rounds per row (each kernel of the row once per round, a fresh order "
                         "each round; ratios: median over rounds of the per-round ratio, with their min-max)")
    ap.add_argument("--timing", choices=("rounds", "calls"), default=timing.MODE,
                    help="rounds: each kernel of a row a do_bench median per round (--rounds); calls: every kernel "
                         "once per iteration, each call timed on its own (--iters), ratios per iteration "
                         "(gluon_bench.timing.MODE says why)")
    ap.add_argument("--iters", type=int, default=timing.ITERS, help="with --timing calls: iterations per row")
    ap.add_argument("--tune-fwd-rows", default=None, metavar="TABLE_JSON",
                    help="with --bwd: tune the forward per (d, causal, N) on the rows that missed 1.0x cuDNN in this "
                         "earlier table (both dtypes), before the grid; out['fwd_adopted'] says what won")
    ap.add_argument("--tune-budget-s", type=float, default=150, help="with --tune-fwd-rows: start no row after this")
    ap.add_argument("--fwd-adopted", default=None, metavar="TUNE_JSON",
                    help="with --bwd: apply a --tune-fwd-rows run's fwd_adopted before the table, and time the "
                         "replaced configuration beside it in those rows")
    args = ap.parse_args(argv)
    timing.ROUNDS, timing.MODE, timing.ITERS = args.rounds, args.timing, args.iters
    import torch
    if args.bwd or args.ncu_bwd:
        return bwd_main(args)

    g, how = load_gluon()
    if args.ncu:
        dt, d, causal, N = args.ncu.split(",")
        dt, d, causal, N = dict(fp16=torch.float16, bf16=torch.bfloat16)[dt], int(d), bool(int(causal)), int(N)
        q, k, v = (torch.randn(16384 // N, 2048 // d, N, d, device="cuda", dtype=dt) for _ in range(3))
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        configs = [None] + ([json.loads(args.ncu_config)] if args.ncu_config else [])
        for cfg in configs:
            g.gluon_forward(q, k, v, causal=causal, config=cfg)
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        for cfg in configs:
            g.gluon_forward(q, k, v, causal=causal, config=cfg)
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
        return 0
    ok, why = g.available()
    result = dict(date_utc=time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), command=" ".join(sys.argv),
                  loaded=how, available=ok, reason=why, checks=[], rows=[])
    print(f"gluon available: {ok} ({why})")
    if not ok:
        Path(args.out).write_text(json.dumps(result, indent=1))
        return 1
    result["versions"] = versions()
    print(result["versions"])
    flash_forward, ff_err = load_triton_forward()
    result["triton_kernel"] = "flashsim.kernels.flash_forward" if flash_forward else f"unavailable: {ff_err}"
    if args.tune:
        result["tuning"] = tune(g, args.warmup, args.rep)
    result["configs"] = {f"d{d}_causal{int(c)}": cfg for (d, c), cfg in g.FWD_CONFIGS.items()}

    # ---- correctness grid: ragged and tiny N, both dtypes, both head dims, causal or not ----
    ns = (1, 17, 100, 129, 1000, 2048 + 37) if not args.quick else (17, 129, 1000)
    t0 = time.time()
    for dtype in (torch.float16, torch.bfloat16):
        for d in (64, 128):
            for causal in (False, True):
                for i, N in enumerate(ns):
                    B, H = (2, 3) if N < 1024 else (1, 2)
                    try:
                        c = check_case(g, dtype, d, causal, B, H, N, seed=i)
                    except Exception as exc:
                        c = dict(dtype=str(dtype), d=d, causal=causal, N=N, ok=False,
                                 error=f"{type(exc).__name__}: {exc}", tb=traceback.format_exc()[-2000:])
                        print(c["tb"])
                    result["checks"].append(c)
                    if not c["ok"]:
                        print("FAIL", c)
    # ping-pong off must compute the same function
    for causal in (False, True):
        result["checks"].append(check_case(g, torch.float16, 128, causal, 1, 2, 1000, pingpong=False, seed=7))
    if flash_forward is not None:
        for d, causal in ((64, False), (128, True)):
            try:
                result["checks"].append(check_backward_on_lse(g, torch.float16, d, causal, 1000))
            except Exception as exc:
                result["checks"].append(dict(what="flash_backward on gluon lse", ok=False,
                                             error=f"{type(exc).__name__}: {exc}"))
            print(result["checks"][-1])
    n_ok = sum(c["ok"] for c in result["checks"])
    print(f"correctness: {n_ok}/{len(result['checks'])} cases pass ({time.time() - t0:.0f} s)")
    Path(args.out).write_text(json.dumps(result, indent=1))

    # ---- timing ----
    if not args.no_timing:
        ns_t = [int(x) for x in args.ns.split(",")]
        if args.quick:
            ns_t = ns_t[:2]
        for dtype in (torch.float16, torch.bfloat16):
            for d in (64, 128):
                for causal in (False, True):
                    for N in ns_t:
                        try:
                            r = time_row(g, flash_forward, dtype, d, causal, N, args.warmup, args.rep,
                                         args.ablation and dtype == torch.float16)
                        except Exception as exc:
                            r = dict(dtype=str(dtype), d=d, causal=causal, N=N,
                                     error=f"{type(exc).__name__}: {exc}")
                            print(traceback.format_exc()[-1500:])
                        result["rows"].append(r)
                        Path(args.out).write_text(json.dumps(result, indent=1))
        print_table(result)
    Path(args.out).write_text(json.dumps(result, indent=1))
    return 0



if __name__ == "__main__":
    sys.exit(main())
