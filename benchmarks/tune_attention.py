"""Tuning data for the course's attention kernels on a GPU: every kernel timed on its own over block shapes,
warps, pipeline stages and pointer vs tensor-descriptor (TMA) loads.

    PYTHONPATH=$PWD python benchmarks/tune_attention.py --out $OUT [--wide] [--n 4096] [--budget-s 480]

``--wide``: the first sweep's grid (pointer loads; it chose flashsim.kernels._common.TUNED_H200). Default: the
configurations near its winners, each with pointer loads and with TMA. Experimental kernels (forward variants,
ping-pong, the atomic-dQ backward) are timed by ``benchmarks/experiments/tune_experiments.py``, which reuses this
script's machinery through :func:`main`'s ``experiments`` argument.

Shapes: fp16, d in {64, 128}, causal or not, N = --n, batch = 16384/N, heads = 2048/d (the speed grid's shapes).
Kernels, each launched directly (flashsim.kernels' own jit functions):
  fwd     _flash_fwd_kernel (flash_forward)            BLOCK_M x BLOCK_N x warps x stages (x TMA)
  dkdv    _bwd_dkdv (flash_backward's K/V pass)         BLOCK_M (streamed Q rows) x BLOCK_N (resident K/V rows)
  dq      _bwd_dq   (flash_backward's Q pass)           BLOCK_M (resident Q rows) x BLOCK_N (streamed K/V rows)
Phase 1 compiles every config in parallel worker processes (tiny launches; Triton's disk cache keeps the
binaries), phase 2 times each at full size in this process, alone on the GPU (median of do_bench), after
checking its outputs against flash_forward / flash_backward's defaults on the same random inputs.
Writes tune_<date>.json under --out; prints the best configs per kernel and shape last.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from flashsim.kernels.runtime import select_backend  # noqa: E402

select_backend()          # GPU or interpreter, chosen before triton is imported (Triton reads it then)

import triton  # noqa: E402

from flashsim.kernels import flash_backward, flash_forward  # noqa: E402
from flashsim.kernels._common import tensor_desc  # noqa: E402
from flashsim.kernels.flash_bwd import _bwd_dkdv, _bwd_dq, _bwd_preprocess  # noqa: E402
from flashsim.kernels.flash_fwd import _flash_fwd_kernel  # noqa: E402
from flashsim.measure import bench  # noqa: E402
from flashsim.measure.provenance import run_info  # noqa: E402

#: experiments' extra kernels, registered by benchmarks/experiments/tune_experiments.py: {kernel: launcher(c, x)},
#: their extra spec flags, their grids ({grid name: {kernel: [(bm, bn, warps, stages, tma), ...]}} per shape),
#: the kernels that always load through TMA, and the module that registers them (imported by compile workers)
EXPERIMENTS = {"launchers": {}, "flags": (), "configs": {}, "tma_only": (), "module": None}

TOKENS, WIDTH = 16384, 2048


# --- the sweep ---------------------------------------------------------------------------------------------------

def parse_spec(spec: str) -> list[dict]:
    """Configurations from ``--spec``: comma-separated ``kernel:BMxBN:warps:stages[:flag...]``, e.g.
    ``fwd:256x64:8:2:tma,fwd:128x64:4:2:tma``. Flags: ``tma``, plus the experiments' own
    (:data:`EXPERIMENTS` ``"flags"``; ``persist<k>`` sets ``persist=k``)."""
    out = []
    for item in filter(None, spec.split(",")):
        kernel, blocks, w, st, *rest = item.split(":")
        bm, bn = (int(x) for x in blocks.split("x"))
        c = dict(kernel=kernel, bm=bm, bn=bn, w=int(w), s=int(st),
                 tma="tma" in rest or kernel in EXPERIMENTS.get("tma_only", ()))
        for flag in rest:
            if flag in EXPERIMENTS["flags"]:
                c[flag] = True
            elif flag.startswith("persist") and "persist" in EXPERIMENTS["flags"]:
                c["persist"] = int(flag[len("persist"):] or 1)
            elif flag != "tma":
                raise ValueError(f"unknown flag {flag!r} in {item!r}")
        out.append(c)
    return out


def configs(shapes, wide=False, spec=None, experiment=None):
    """Wide: the first sweep's grid (pointer loads). Otherwise: around its winners, pointer loads vs TMA.
    ``experiment``: a name in :data:`EXPERIMENTS` ``"configs"``: that experiment's grid instead."""
    out = []
    for d, causal in shapes:
        if spec:
            out += [dict(c, d=d, causal=causal) for c in parse_spec(spec)]
            continue
        if wide:
            for bm, bn, w, s in itertools.product((64, 128), (32, 64, 128), (4, 8), (2, 3, 4)):
                if not (w == 8 and bm * bn < 64 * 64):
                    out.append(dict(kernel="fwd", d=d, causal=causal, bm=bm, bn=bn, w=w, s=s, tma=False))
            for bm, bn, w, s in itertools.product((16, 32, 64, 128), (64, 128), (4, 8), (2, 3, 4)):
                if not ((w == 8 and bm * bn < 64 * 64) or bm > bn):
                    out.append(dict(kernel="dkdv", d=d, causal=causal, bm=bm, bn=bn, w=w, s=s, tma=False))
            for bm, bn, w, s in itertools.product((64, 128), (16, 32, 64, 128), (4, 8), (2, 3, 4)):
                if not ((w == 8 and bm * bn < 64 * 64) or bn > bm):
                    out.append(dict(kernel="dq", d=d, causal=causal, bm=bm, bn=bn, w=w, s=s, tma=False))
            continue
        if experiment:
            for kern, cands in EXPERIMENTS["configs"][experiment].items():
                out += [dict(kernel=kern, d=d, causal=causal, bm=bm, bn=bn, w=w, s=st, tma=tma)
                        for bm, bn, w, st, tma in cands]
            continue
        near = {"fwd": [(64, 128, 4, 2), (128, 64, 4, 2), (64, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 3),
                        (64, 128, 4, 3), (128, 128, 8, 2), (128, 64, 4, 3)],
                "dkdv": [(32, 64, 4, 2), (32, 64, 4, 3), (64, 64, 4, 2), (64, 128, 8, 2), (64, 128, 8, 3),
                         (32, 128, 4, 3), (16, 64, 4, 3), (64, 64, 4, 3)],
                "dq": [(128, 64, 8, 3), (128, 64, 8, 4), (64, 64, 4, 3), (64, 32, 4, 3), (64, 32, 4, 2),
                       (128, 32, 8, 4), (128, 128, 8, 2), (64, 64, 4, 2)]}
        for kern, cands in near.items():
            for (bm, bn, w, s), tma in itertools.product(cands, (False, True)):
                out.append(dict(kernel=kern, d=d, causal=causal, bm=bm, bn=bn, w=w, s=s, tma=tma))
    return out


def inputs(d, causal, n, device="cuda", batch=None, heads=None):
    import torch
    B, H = batch or max(1, TOKENS // n), heads or WIDTH // d
    torch.manual_seed(1000 * d + n + causal)
    q, k, v, do = (torch.randn(B, H, n, d, device=device, dtype=torch.float16) for _ in range(4))
    o, lse = flash_forward(q, k, v, causal=causal)
    dq, dk, dv = flash_backward(q, k, v, o, lse, do, causal=causal)
    delta = torch.empty(B, H, n, device=device, dtype=torch.float32)
    _bwd_preprocess[(triton.cdiv(n, 64), B * H)](o, do, delta, *o.stride(), *do.stride(), H, n, d,
                                                  BLOCK_M=64, BLOCK_D=d)
    return dict(q=q, k=k, v=v, do=do, o=o, lse=lse, dq=dq, dk=dk, dv=dv, delta=delta, B=B, H=H, n=n, d=d)


def launcher(c, x):
    """A zero-argument launch of config c on inputs x, and a check of what it wrote."""
    import torch
    q, k, v, do, lse, delta = x["q"], x["k"], x["v"], x["do"], x["lse"], x["delta"]
    B, H, n, d = x["B"], x["H"], x["n"], x["d"]
    scale = d ** -0.5
    bm, bn, opts = c["bm"], c["bn"], dict(num_warps=c["w"], num_stages=c["s"])
    kern, causal = c["kernel"], c["causal"]

    def desc(t, rows):
        return tensor_desc(t, rows, d)

    def err(a, b):
        return float((a.float() - b.float()).norm() / b.float().norm())
    tma = c.get("tma", False)
    if kern == "fwd":
        o = torch.empty_like(q)
        lse2 = torch.empty_like(lse)
        descs = (desc(q, bm), desc(k, bn), desc(v, bn), desc(o, bm)) if tma else (None,) * 4

        def run():
            return _flash_fwd_kernel[(triton.cdiv(n, bm), B * H)](q, k, v, o, lse2, scale, *descs, *q.stride(),
                                                           *k.stride(), *v.stride(), *o.stride(), H, n, d,
                                                           CAUSAL=causal, USE_TMA=tma, BLOCK_M=bm, BLOCK_N=bn,
                                                           BLOCK_D=d, **opts)
        return run, lambda: err(o, x["o"])
    if kern == "dkdv":
        dk, dv = torch.empty_like(k), torch.empty_like(v)
        descs = (desc(q, bm), desc(do, bm)) if tma else (None, None)

        def run():
            return _bwd_dkdv[(triton.cdiv(n, bn), B * H)](q, k, v, do, dk, dv, lse, delta, scale, *descs,
                                                          *q.stride(), H, n, d, CAUSAL=causal, USE_TMA=tma,
                                                          BLOCK_M=bm, BLOCK_N=bn, BLOCK_D=d, **opts)
        return run, lambda: max(err(dk, x["dk"]), err(dv, x["dv"]))
    if kern == "dq":
        dq = torch.empty_like(q)
        descs = (desc(k, bn), desc(v, bn)) if tma else (None, None)

        def run():
            return _bwd_dq[(triton.cdiv(n, bm), B * H)](q, k, v, do, dq, lse, delta, scale, *descs, *q.stride(), H, n, d,
                                                 CAUSAL=causal, USE_TMA=tma, BLOCK_M=bm, BLOCK_N=bn, BLOCK_D=d,
                                                 **opts)
        return run, lambda: err(dq, x["dq"])
    if kern in EXPERIMENTS["launchers"]:
        return EXPERIMENTS["launchers"][kern](c, x)
    raise ValueError(kern)


def _compile_worker(batch, experiments_module=None):
    """Run each config once on a tiny input (same constexprs, dtypes and divisibility): fills Triton's cache.
    ``experiments_module``: imported first, so that it registers its kernels in this (spawned) process too."""
    import importlib

    import torch
    if experiments_module:
        importlib.import_module(experiments_module)
    out = []
    cache = {}
    for c in batch:
        key = (c["d"], c["causal"])
        if key not in cache:
            cache[key] = inputs(c["d"], c["causal"], 256, batch=1)
        t0 = time.time()
        try:
            run, _ = launcher(c, cache[key])
            run()
            torch.cuda.synchronize()
            out.append((c, None, time.time() - t0))
        except Exception as exc:
            out.append((c, f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300] if str(exc) else ''}",
                        time.time() - t0))
    return out


def main(argv=None, experiment=None):
    """The sweep. ``experiment``: run that :data:`EXPERIMENTS` grid (registered by
    benchmarks/experiments/tune_experiments.py) instead of the product kernels' grid."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "benchmarks", "results"))
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--budget-s", type=float, default=480)
    ap.add_argument("--jobs", type=int, default=14)
    ap.add_argument("--kernels", default="fwd,dkdv,dq" if experiment is None else
                    ",".join(["fwd", "dkdv", "dq", *EXPERIMENTS["launchers"]]))
    ap.add_argument("--wide", action="store_true", help="the first sweep's wide grid (pointer loads only)")
    ap.add_argument("--d", default="64,128")
    ap.add_argument("--spec", help="only these configurations: kernel:BMxBN:warps:stages[:tma],... (see parse_spec)")
    ap.add_argument("--regs", action="store_true", help="also print registers, spills and shared memory per config")
    args = ap.parse_args(argv)
    t_start = time.time()
    import concurrent.futures as cf
    import multiprocessing as mp

    import torch
    from tqdm import tqdm
    kernels = args.kernels.split(",")
    shapes = [(int(d), c) for d in args.d.split(",") for c in (False, True)]
    todo = [c for c in configs(shapes, args.wide, args.spec, experiment) if c["kernel"] in kernels]
    print(f"{len(todo)} configs; compiling with {args.jobs} workers", flush=True)
    compile_err = {}
    # TMA configs in a pool of their own: a compiler crash there must not cost the others
    for part in ([c for c in todo if not c.get("tma")], [c for c in todo if c.get("tma")]):
        batches = [part[i::args.jobs] for i in range(args.jobs) if part[i::args.jobs]]
        try:
            with cf.ProcessPoolExecutor(args.jobs, mp_context=mp.get_context("spawn")) as pool:
                futs = {pool.submit(_compile_worker, b, EXPERIMENTS.get("module")): b for b in batches}
                for fut in tqdm(cf.as_completed(futs), total=len(futs), desc="compile batches", leave=False):
                    try:
                        res = fut.result()
                    except Exception as exc:              # a worker died (compiler crash): its whole batch
                        res = [(c, f"worker died: {exc!r}"[:300], 0) for c in futs[fut]]
                    for c, e, _ in res:
                        if e:
                            compile_err[json.dumps(c, sort_keys=True)] = e
        except Exception as exc:
            print("compile pool failed:", repr(exc), flush=True)
    print(f"compiled in {time.time() - t_start:.0f} s; {len(compile_err)} failed", flush=True)
    seen = set()
    for k_, e in compile_err.items():
        c = json.loads(k_)
        if (c["kernel"], e[:80]) not in seen:
            seen.add((c["kernel"], e[:80]))
            print("  compile error", c, e, flush=True)
    results = []
    date = time.strftime("%Y-%m-%d", time.gmtime())
    path = os.path.join(args.out, f"tune_{date}.json")
    info = run_info(" ".join(["python"] + sys.argv))
    bar = tqdm(total=sum(json.dumps(c, sort_keys=True) not in compile_err for c in todo), desc="timing", leave=False)
    for d, causal in shapes:
        x = inputs(d, causal, args.n)
        for c in todo:
            if (c["d"], c["causal"]) != (d, causal) or json.dumps(c, sort_keys=True) in compile_err:
                continue
            bar.update()
            if time.time() - t_start > args.budget_s:
                break
            r = dict(c)
            try:
                run, check = launcher(c, x)
                handle = run()                    # the compiled kernel: registers, spills, shared memory
                torch.cuda.synchronize()
                if args.regs and hasattr(handle, "n_regs"):
                    r.update(regs=handle.n_regs, spills=handle.n_spills,
                             smem=getattr(handle.metadata, "shared", None))
                r["err"] = check()
                r["ms"] = bench(run, warmup=5, rep=25)
            except Exception as exc:
                r["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1][:200] if str(exc) else ''}"
            results.append(r)
        del x
        torch.cuda.empty_cache()
        with open(path, "w") as f:
            json.dump(dict(info=info, n=args.n, results=results, compile_errors=compile_err), f, indent=1)
    bar.close()
    # best per (kernel, shape), then the best full backward per shape
    print(f"\n{len(results)} timed in {time.time() - t_start:.0f} s; N={args.n}; ms (err vs defaults)")
    best = {}
    for r in results:
        if "ms" in r and r["err"] < 2e-2:
            key = (r["kernel"], r["d"], r["causal"], r.get("tma", False), bool(r.get("ws")), bool(r.get("oneloop")),
                   bool(r.get("preqk")), r.get("persist", 0), bool(r.get("flatten")))
            if key not in best or r["ms"] < best[key]["ms"]:
                best[key] = r
    bad = [r for r in results if "ms" in r and not r["err"] < 2e-2]
    print(f"configs with err >= 2e-2 (wrong): {len(bad)}", [(r['kernel'], r['bm'], r['bn'], r['w'], r['s'], r['err'])
                                                              for r in bad[:6]])
    from benchmarks.attention_speed import flops
    for (kern, d, causal, *_), r in sorted(best.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0], kv[0][3:])):
        B, H = max(1, TOKENS // args.n), WIDTH // d
        mode = "fwd" if kern.startswith("fwd") else "bwd"  # fwd (and experiments' fwd_*)
        extra = f" tma={r.get('tma', False)}" + "".join(f" {f}={r[f]}" for f in ("ws", "oneloop", "preqk", "persist", "flatten") if f in r)
        if "regs" in r:
            extra += f" regs={r['regs']} spills={r['spills']} smem={r['smem']}"
        print(f"d={d:3d} causal={causal!s:5} {kern:8s} bm={r['bm']:3d} bn={r['bn']:3d} w={r['w']} s={r['s']}{extra} "
              f"{r['ms']:.3f} ms  {flops(mode, B, H, args.n, d, causal) / r['ms'] / 1e9:.0f} TFLOP/s(if alone)")
    for d, causal in shapes:
        B, H = max(1, TOKENS // args.n), WIDTH // d
        sep = [min((r for key, r in best.items() if key[:3] == (kern, d, causal)), key=lambda r: r["ms"],
                   default=None) for kern in ("dkdv", "dq")]
        f = flops("bwd", B, H, args.n, d, causal)
        if all(sep):
            ms = sep[0]["ms"] + sep[1]["ms"]
            print(f"d={d} causal={causal}: backward best {ms:.3f} ms = {f / ms / 1e9:.0f} TFLOP/s (no preprocess)")


if __name__ == "__main__":
    main()
