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

``--tune`` first times each candidate launch configuration (:data:`CANDIDATES`, each checked for correctness on
ragged N first) in fp16 at N = 2048 and 16384, and keeps the fastest (geometric mean) per (d, causal) for the rest
of the run. ``--ncu SHAPE`` runs one forward of one shape only, for ``ncu`` (dtype,d,causal,N, e.g. fp16,128,0,2048).

Only ``flashsim.kernels.gluon`` (and, for the Triton column, ``flashsim.kernels``) and the numpy-only reference
``flashsim.model.attention.reference`` are imported; if ``flashsim.kernels`` fails to import, the Gluon files are
loaded straight from their paths.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("FLASHSIM_POISON", "1")
sys.path.insert(0, str(ROOT))

from flashsim.model.attention.reference import reference_attention, reference_attention_grads  # noqa: E402


def load_gluon():
    """flashsim.kernels.gluon, imported normally or, if the package is broken, from its files."""
    try:
        import flashsim.kernels.gluon as g
        return g, "import"
    except Exception as exc:  # someone else's in-progress edit elsewhere in the package
        print(f"import flashsim.kernels.gluon failed ({type(exc).__name__}: {exc}); loading from files")
        pkg_dir = ROOT / "flashsim" / "kernels" / "gluon"
        spec = importlib.util.spec_from_file_location("flashsim_gluon", pkg_dir / "__init__.py",
                                                      submodule_search_locations=[str(pkg_dir)])
        g = importlib.util.module_from_spec(spec)
        sys.modules["flashsim_gluon"] = g
        spec.loader.exec_module(g)
        return g, "file"


def load_triton_forward():
    try:
        from flashsim.kernels import flash_forward
        return flash_forward, None
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}"


def rel_err(x, ref):
    import torch
    x = x.double()
    if not torch.isfinite(x).all():
        return float("inf")
    return float((x - ref).norm() / ref.norm())


def _host64(*xs):
    """float64 numpy copies on the host, for the model's reference."""
    return [x.detach().double().cpu().numpy() for x in xs]


def reference(q, k, v, causal, scale):
    """The one float64 reference (flashsim.model.attention.reference) and its natural-log logsumexp, on q's device."""
    import torch
    o, lse = reference_attention(*_host64(q, k, v), causal=causal, sm_scale=scale, return_lse=True)
    return torch.from_numpy(o).to(q.device), torch.from_numpy(lse).to(q.device)


def reference_grads(q, k, v, do, causal, scale):
    """(dq, dk, dv) of the one float64 reference, on q's device."""
    import torch
    grads = reference_attention_grads(*_host64(q, k, v, do), causal=causal, sm_scale=scale)
    return [torch.from_numpy(g).to(q.device) for g in grads]


def check_case(g, dtype, d, causal, B, H, N, pingpong=True, seed=0):
    import torch
    import torch.nn.functional as F
    torch.manual_seed(seed)
    q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=dtype) for _ in range(3))
    scale = d ** -0.5
    o, lse = g.gluon_forward(q, k, v, causal=causal, pingpong=pingpong)
    torch.cuda.synchronize()
    ref, ref_lse = reference(q, k, v, causal, scale)
    o_torch = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    err, err_t = rel_err(o, ref), rel_err(o_torch, ref)
    lse_err = float((lse.double() - ref_lse).abs().max()) if torch.isfinite(lse).all() else float("inf")
    ok = err <= 2 * err_t + 1e-6 and lse_err <= 1e-3 * max(1.0, float(ref_lse.abs().max()))
    return dict(dtype=str(dtype).replace("torch.", ""), d=d, causal=causal, B=B, H=H, N=N, pingpong=pingpong,
                err=err, err_torch=err_t, lse_err=lse_err, ok=bool(ok))


#: launch configurations tried by --tune, per head dim (keys of flashsim.kernels.gluon.FWD_CONFIGS)
CANDIDATES = {
    64: [dict(NC=2, BLOCK_N=128, STAGES=3, CONSUMER_REGS=240), dict(NC=2, BLOCK_N=128, STAGES=2, CONSUMER_REGS=240),
         dict(NC=3, BLOCK_N=128, STAGES=3, CONSUMER_REGS=160)],
    128: [dict(NC=2, BLOCK_N=128, STAGES=2, CONSUMER_REGS=240), dict(NC=2, BLOCK_N=64, STAGES=4, CONSUMER_REGS=240)],
}


def tune(g, warmup, rep):
    """Time every candidate at fp16, N in (2048, 16384); keep the fastest per (d, causal) in g.FWD_CONFIGS."""
    import torch
    import torch.nn.functional as F
    out = []
    for d, cands in CANDIDATES.items():
        for causal in (False, True):
            scores = []
            for cand in cands:
                cfg = dict(g.FWD_CONFIGS[(d, causal)], **cand)
                rec = dict(d=d, causal=causal, config=cfg, ok=True, ms={})
                try:
                    for N in (129, 1000):
                        torch.manual_seed(N)
                        q, k, v = (torch.randn(2, 3, N, d, device="cuda", dtype=torch.float16) for _ in range(3))
                        o, _ = g.gluon_forward(q, k, v, causal=causal, config=cfg)
                        ref, _ = reference(q, k, v, causal, d ** -0.5)
                        e, et = rel_err(o, ref), rel_err(F.scaled_dot_product_attention(q, k, v, is_causal=causal), ref)
                        rec["ok"] &= bool(e <= 2 * et + 1e-6)
                    for N in (2048, 16384):
                        B, H = 16384 // N, 2048 // d
                        q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=torch.float16) for _ in range(3))
                        rec["ms"][N] = bench(lambda: g.gluon_forward(q, k, v, causal=causal, config=cfg), warmup, rep)
                    rec["geomean_ms"] = math.prod(rec["ms"].values()) ** (1 / len(rec["ms"]))
                except Exception as exc:
                    rec.update(ok=False, error=f"{type(exc).__name__}: {str(exc)[:400]}")
                print("tune", rec)
                out.append(rec)
                if rec["ok"]:
                    scores.append((rec["geomean_ms"], cfg))
            if scores:
                g.FWD_CONFIGS[(d, causal)] = min(scores, key=lambda x: x[0])[1]
            print("chosen", d, causal, g.FWD_CONFIGS[(d, causal)])
    return out


def check_backward_on_lse(g, dtype, d, causal, N):
    """The course's Triton backward fed with the Gluon forward's (o, lse): gradients vs the float64 reference's,
    each within 2x the error of PyTorch's SDPA gradients in the same dtype."""
    import torch
    import torch.nn.functional as F
    from flashsim.kernels import flash_backward
    torch.manual_seed(3)
    q, k, v, do = (torch.randn(1, 2, N, d, device="cuda", dtype=dtype) for _ in range(4))
    o, lse = g.gluon_forward(q, k, v, causal=causal)
    dq, dk, dv = flash_backward(q, k, v, o, lse, do, causal=causal)
    gref = reference_grads(q, k, v, do, causal, d ** -0.5)
    qt, kt, vt = (t.detach().clone().requires_grad_() for t in (q, k, v))
    gt = torch.autograd.grad(F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal), (qt, kt, vt), do)
    errs = [rel_err(a, r) for a, r in zip((dq, dk, dv), gref)]
    errs_t = [rel_err(a, r) for a, r in zip(gt, gref)]
    ok = all(e <= 2 * et + 1e-6 for e, et in zip(errs, errs_t))
    return dict(dtype=str(dtype).replace("torch.", ""), d=d, causal=causal, N=N, what="flash_backward on gluon lse",
                err=errs, err_torch=errs_t, ok=bool(ok))


def flops(B, H, N, d, causal):
    f = 4.0 * B * H * N * N * d
    return f / 2 if causal else f


def bench(fn, warmup, rep):
    import triton
    return triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median")


def time_row(g, flash_forward, dtype, d, causal, N, warmup, rep, ablation):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    B, H = 16384 // N, 2048 // d
    torch.manual_seed(N + d)
    q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=dtype) for _ in range(3))
    row = dict(dtype=str(dtype).replace("torch.", ""), d=d, causal=causal, N=N, B=B, H=H)
    fl = flops(B, H, N, d, causal)
    # correctness of this very row before timing (the host float64 reference on a slice of heads: ≤ 2^28 scores)
    hs = slice(0, max(1, min(H, (1 << 27) // (B * N * N))))
    ref, _ = reference(q[:, hs], k[:, hs], v[:, hs], causal, d ** -0.5)
    o, _ = g.gluon_forward(q, k, v, causal=causal)
    o_t = F.scaled_dot_product_attention(q[:, hs], k[:, hs], v[:, hs], is_causal=causal)
    row["err"], row["err_torch"] = rel_err(o[:, hs], ref), rel_err(o_t, ref)
    row["correct"] = bool(row["err"] <= 2 * row["err_torch"] + 1e-6)
    del ref, o_t

    def sdpa(backend):
        def fn():
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return fn

    fns = {"cudnn": sdpa(SDPBackend.CUDNN_ATTENTION), "flash": sdpa(SDPBackend.FLASH_ATTENTION),
           "gluon": lambda: g.gluon_forward(q, k, v, causal=causal)}
    if flash_forward is not None:
        fns["triton"] = lambda: flash_forward(q, k, v, causal=causal)
    if ablation:
        fns["gluon_no_pingpong"] = lambda: g.gluon_forward(q, k, v, causal=causal, pingpong=False)
    for name, fn in fns.items():
        try:
            ms = bench(fn, warmup, rep)
            row[f"{name}_ms"] = ms
            row[f"{name}_tflops"] = fl / ms * 1e-9
        except Exception as exc:
            row[f"{name}_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    for base in ("cudnn", "flash", "triton"):
        if f"{base}_ms" in row and "gluon_ms" in row:
            row[f"gluon_vs_{base}"] = row[f"{base}_ms"] / row["gluon_ms"]
    return row


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
    args = ap.parse_args(argv)
    import torch

    g, how = load_gluon()
    if args.ncu:
        dt, d, causal, N = args.ncu.split(",")
        dt, d, causal, N = dict(fp16=torch.float16, bf16=torch.bfloat16)[dt], int(d), bool(int(causal)), int(N)
        q, k, v = (torch.randn(16384 // N, 2048 // d, N, d, device="cuda", dtype=dt) for _ in range(3))
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        g.gluon_forward(q, k, v, causal=causal)
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        g.gluon_forward(q, k, v, causal=causal)
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


def print_table(result):
    print("\n dtype     d causal     N | cuDNN  flash triton  gluon  (TFLOP/s) | g/cuDNN g/flash g/triton | noPP | ok")
    for r in result["rows"]:
        def f(k):
            v = r.get(k)
            return f"{v:6.0f}" if isinstance(v, (int, float)) else "     -"

        def x(k):
            v = r.get(k)
            return f"{v:7.2f}" if isinstance(v, (int, float)) else "      -"
        print(f" {r['dtype']:8s} {r['d']:3d} {str(r['causal']):6s} {r['N']:5d} |{f('cudnn_tflops')} {f('flash_tflops')}"
              f" {f('triton_tflops')} {f('gluon_tflops')}           |{x('gluon_vs_cudnn')} {x('gluon_vs_flash')}"
              f"  {x('gluon_vs_triton')} |{f('gluon_no_pingpong_tflops')} | {r.get('correct', r.get('error', '?'))}")


if __name__ == "__main__":
    sys.exit(main())
