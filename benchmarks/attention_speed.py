"""Attention speed: the course's FlashAttention kernels next to FlashAttention-4, PyTorch SDPA's backends and naive
PyTorch.

On the GPU machine (imports only torch, triton, numpy, tqdm; matplotlib only for the figure):

    PYTHONPATH=$PWD python benchmarks/attention_speed.py --out $OUT [--quick] [--budget-s 240] [--rounds 5]
        [--ns 8192] [--ds 64,128] [--modes fwd,bwd] [--only-dtype float16]

Grid (issue 5): modes fwd and bwd, fp16 and bf16, d in {64, 128}, causal or not, N in {1024, ..., 16384},
batch = 16384/N, heads = 2048/d (so every row has the same 16384 tokens x 2048 channels). ``--quick``: fp16 only,
N in {1024, 4096, 16384}; ``--ns``, ``--ds``, ``--modes`` pick rows. Rows run in priority order (fp16 first) and the
JSON (and its markdown table) is rewritten after every row, so a run cut short by ``--budget-s`` or a timeout still
leaves every finished row on disk.

Implementations: the course's kernels (flashsim.kernels: flash_forward, and flash_backward through autograd),
``ours_triton`` (the Triton kernels of chapters 05-12, ``gluon=False``) and ``ours_gluon`` (the Gluon Hopper
kernels of chapter 14, ``gluon=True``, both passes; a recorded error off Hopper), and ``ours``, the faster of the
two in that row (not timed again: ``ours_is`` names which), ``fa4``: FlashAttention-4 (``flash-attn-4``, its CuTe
DSL sm90/sm100 kernels, benchmarks/gluon_bench/fa4.py), an optional reference: where it does not import or has no
kernels for the GPU, the column is absent and the JSON's ``absent`` says why; SDPA with one backend forced via
``torch.nn.attention.sdpa_kernel`` (``flash`` = FlashAttention-2, ``cudnn``, ``efficient``), and ``naive``
(matmul, softmax, matmul; S and P in HBM; only up to ``--naive-max-n``, as it needs O(N^2) memory).

FLOPs, FA2 convention: 4*B*H*N^2*d forward, halved when causal; backward 2.5x the forward. Times: median of
``triton.testing.do_bench`` (flashsim.measure.bench). bwd times one backward pass (torch.autograd.grad with
retain_graph) of a forward done beforehand, for every implementation alike. ``--rounds R``: every implementation of a
row is timed once per round, in a fresh order each round (benchmarks/gluon_bench/timing.py's interleaved rounds),
R rounds; a time is the median over rounds and a ratio the median of the per-round ratios (with their min and max),
so that clock drift within a row reaches every column alike.

Correctness is checked before timing, on every row: each implementation runs once on the row's own random inputs
and its output (and dq, dk, dv in bwd) on a slice (batch 0, heads 0-1, all N rows) is compared with float64 SDPA
(math backend) of that slice; ours must be finite and within 2x the error of torch's own SDPA (default backend)
in the same dtype, and so must every course kernel that ran (a row passes only if all of them do); FA4 gets the same
check (its verdict ``check.fa4.ok``; it does not decide the row). ``--sweep``: with the budget left after the grid,
our kernels at other block sizes, warps and pipeline stages (fp16, N=8192), as tuning data.

The FA2 backward with dQ by atomic adds, which earlier runs timed here as ``ours_atomic``, is an experiment now:
``benchmarks/experiments/atomic_bwd.py``.

Here (no GPU): draw the figure and the markdown table from a results file:

    .venv/bin/python benchmarks/attention_speed.py --plot-only benchmarks/results/attention_speed_<date>.json \\
        --figure figures/speed_h200.png --markdown benchmarks/results/attention_speed_<date>.md
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import zlib

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from flashsim import kernels  # noqa: E402  (cheap: the kernels, torch and triton load on first use)
from flashsim.kernels.runtime import select_backend  # noqa: E402
from flashsim.measure import bench  # noqa: E402
from flashsim.measure.provenance import run_info  # noqa: E402
from benchmarks.gluon_bench import fa4, timing  # noqa: E402  (FA4's guarded import; interleaved rounds)

IMPLS = ("ours", "ours_triton", "ours_gluon", "fa4", "flash", "cudnn", "efficient", "naive")
#: the course's kernels: ``ours`` is the faster of those that ran and passed the check in a row
COURSE = ("ours_triton", "ours_gluon")
#: the implementations that get a correctness verdict (``ok``): ours, the course's kernels, and the FA4 reference
CHECKED = ("ours",) + COURSE + ("fa4",)
#: the issue's targets: (mode, baseline) -> minimum ours/baseline ratio, for rows with N >= TARGET_MIN_N
TARGETS = {("fwd", "flash"): 1.1, ("fwd", "cudnn"): 0.9, ("bwd", "flash"): 1.1}
TARGET_MIN_N = 2048
#: issue 30's targets against FlashAttention-4, for rows with N >= FA4_TARGET_MIN_N (kept apart from TARGETS, which
#: chapter 14's headline reads)
FA4_TARGETS = {("fwd", "fa4"): 1.0, ("bwd", "fa4"): 0.95}
FA4_TARGET_MIN_N = 4096
TOKENS, WIDTH = 16384, 2048          # batch * N and heads * d of every row


def flops(mode: str, batch: int, heads: int, n: int, d: int, causal: bool) -> float:
    """FA2 convention: 4*B*H*N^2*d forward (2 matmuls, 2 FLOPs per multiply-add), halved causal; bwd 2.5x."""
    f = 4.0 * batch * heads * n * n * d
    if causal:
        f *= 0.5
    if mode == "bwd":
        f *= 2.5
    return f


def make_grid(quick: bool = False, dtypes=None, ns=None, ds=(64, 128), modes=("fwd", "bwd"),
              tokens: int = TOKENS, width: int = WIDTH) -> list[dict]:
    """The rows, in the order they run (priority: fp16 before bf16, then mode, d, causal, N)."""
    dtypes = dtypes or (("float16",) if quick else ("float16", "bfloat16"))
    ns = ns or ((1024, 4096, 16384) if quick else (1024, 2048, 4096, 8192, 16384))
    rows = []
    for dt in dtypes:
        for mode in modes:
            for d in ds:
                for causal in (False, True):
                    for n in ns:
                        rows.append(dict(mode=mode, dtype=dt, d=d, causal=causal, n=n, batch=max(1, tokens // n),
                                         heads=max(1, width // d)))
    return rows


# --- implementations ------------------------------------------------------------------------------------------

def _sdpa(backend):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    be = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
          "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}[backend]

    def run(q, k, v, causal):
        with sdpa_kernel(be):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return run


def _naive(q, k, v, causal):
    import torch
    n = q.shape[-2]
    s = torch.matmul(q, k.transpose(-1, -2)) * (q.shape[-1] ** -0.5)      # (B, H, N, N) in HBM
    if causal:
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v)


def _ours(q, k, v, causal, gluon=None):
    """The course's kernels: gluon=None each pass's default (on Hopper the Gluon forward, the Triton backward),
    False the Triton kernels of chapters 05-12, True the Gluon kernels (Hopper only). bwd rows time the backward
    pass of :func:`flashsim.kernels.attention` with the same choice."""
    if q.requires_grad:
        return kernels.attention(q, k, v, causal=causal, gluon=gluon)
    return kernels.flash_forward(q, k, v, causal=causal, gluon=gluon)[0]


def implementation(name):
    if name == "ours":
        return _ours
    if name == "ours_triton":
        return lambda q, k, v, causal: _ours(q, k, v, causal, gluon=False)
    if name == "ours_gluon":
        return lambda q, k, v, causal: _ours(q, k, v, causal, gluon=True)
    if name == "naive":
        return _naive
    if name == "fa4":
        return fa4.attention
    if name == "torch":                        # torch's own choice of backend: the error yardstick
        import torch.nn.functional as F
        return lambda q, k, v, causal: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return _sdpa(name)


def _rel_err(x, ref) -> float:
    return float((x.double() - ref).norm() / ref.norm())


def check_correct(q, k, v, do, causal, mode, impls) -> dict:
    """Errors vs float64 math SDPA on batch 0, heads 0-1 of the row's inputs; ours must be <= 2x torch's own.

    Each implementation runs on the full inputs (the very launch configuration that is timed next, so no extra
    compile); only its slice of o (and dq, dk, dv) is compared with the float64 reference of that slice. That
    reference is SDPA's math backend in float64 on the device, not the model's host reference
    (flashsim.model.attention.reference, which the tests and gpu_validate use): at N=16384 the host would spend
    minutes per backward row of the grid.
    """
    import torch
    need_grad = mode == "bwd"

    def outputs(fn, xs, g, part):
        xs = [x.detach().clone().requires_grad_(need_grad) for x in xs]
        with torch.set_grad_enabled(need_grad):
            o = fn(*xs, causal)
        out = {"o": o.detach()[part]}
        if need_grad:
            grads = torch.autograd.grad(o, xs, g.to(o.dtype))
            out.update(dq=grads[0][part], dk=grads[1][part], dv=grads[2][part])
        return out

    sl = (slice(0, 1), slice(0, 2))
    ref = outputs(implementation("math"), [x[sl].double() for x in (q, k, v)], do[sl].double(), ...)
    res = {}
    for name in ("torch",) + tuple(impls):
        try:
            out = outputs(implementation(name), (q, k, v), do, sl)
            res[name] = {key: _rel_err(val, ref[key]) for key, val in out.items()}
            res[name]["finite"] = all(bool(torch.isfinite(val).all()) for val in out.values())
            del out
        except Exception as exc:  # a backend that does not take this dtype/shape/device
            res[name] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"}
    yard = res.get("torch", {})
    for name in impls:
        if name in CHECKED and "error" not in res[name]:
            res[name]["ok"] = bool(res[name]["finite"] and "error" not in yard
                                   and all(res[name][key] <= 2 * yard[key] for key in ref))
    ours = res.get("ours", {})
    res["pass"] = bool(ours.get("ok", False))
    return res


def _error(exc) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"


def timed_call(fn, q, k, v, do, causal, mode):
    """The no-argument call that is timed for one implementation, after one untimed call (compile, plan): fwd its
    forward without autograd, bwd ``torch.autograd.grad`` of a forward done here, kept (retain_graph)."""
    import torch
    if mode == "fwd":
        def call():
            with torch.no_grad():
                return fn(q, k, v, causal)
    else:
        xs = [x.detach().requires_grad_() for x in (q, k, v)]
        o = fn(*xs, causal)

        def call():
            return torch.autograd.grad(o, xs, do, retain_graph=True)
    call()
    return call


def time_calls(fns: dict, timer=None, rounds: int = 1, warmup=10, rep=40, seed=0):
    """({name: [ms per round]}, {name: error}): on a GPU :func:`benchmarks.gluon_bench.timing.time_rounds`:
    ``rounds`` rounds, every implementation once per round in a fresh (seeded) order, each a
    ``triton.testing.do_bench`` median; ``timer(fn)`` once per implementation where given (a test's stub), and in
    the interpreter flashsim.measure.bench (wall clock)."""
    if timer is None and not kernels.INTERPRETER:
        return timing.time_rounds(fns, warmup, rep, rounds=rounds, seed=seed)
    timer = timer or (lambda fn: bench(fn, warmup=warmup, rep=rep))
    per, errors = {}, {}
    for name, fn in fns.items():
        try:
            per[name] = [float(timer(fn))]
        except Exception as exc:
            errors[name] = _error(exc)
    return per, errors


def time_row(row: dict, impls=IMPLS, timer=None, naive_max_n: int = 4096, device=None, warmup=10,
             rep=40, rounds: int = 1) -> dict:
    """Check and time one row; returns the row with 'ms', 'tflops', 'errors', ratios and target verdicts (and, where
    an optional implementation cannot run here, 'absent': why)."""
    import statistics

    import torch
    if device is None:
        device = "cpu" if kernels.INTERPRETER else "cuda"
    dtype = getattr(torch, row["dtype"])
    B, H, N, d, causal, mode = row["batch"], row["heads"], row["n"], row["d"], row["causal"], row["mode"]
    impls = [i for i in impls if not (i == "naive" and N > naive_max_n)]
    out = dict(row)
    if "fa4" in impls:
        ok, why = fa4.available(device)
        if not ok:                                  # optional: its column is absent, with the reason
            impls = [i for i in impls if i != "fa4"]
            out["absent"] = {"fa4": why}
    seed = zlib.crc32(repr(sorted(row.items())).encode())
    torch.manual_seed(seed)                                             # fresh random inputs each row
    q, k, v, do = (torch.randn(B, H, N, d, device=device, dtype=dtype) for _ in range(4))
    out["flops"] = flops(mode, B, H, N, d, causal)
    derived = "ours" in impls                    # ours = the faster course kernel: timed as those, not again
    if derived:
        impls = [i for i in impls if i != "ours"] + [c for c in COURSE if c not in impls]
    out["check"] = check_correct(q, k, v, do, causal, mode, impls)
    fns, out["errors"] = {}, {}
    for name in impls:
        try:
            fns[name] = timed_call(implementation(name), q, k, v, do, causal, mode)
        except Exception as exc:
            out["errors"][name] = _error(exc)
    per, errors = time_calls(fns, timer, rounds, warmup, rep, seed=seed % 1000)
    out["errors"].update(errors)
    out["ms"] = {name: statistics.median(x for x in per[name] if x is not None) for name in fns
                 if any(x is not None for x in per.get(name, ()))}
    if timer is None:
        out["rounds_ms"] = {name: per[name] for name in out["ms"]}
    del fns
    if device == "cuda":
        torch.cuda.empty_cache()
    if derived:
        choose_ours(out)
    out["tflops"] = {name: out["flops"] / ms / 1e9 for name, ms in out["ms"].items() if ms > 0}
    add_verdicts(out)
    return out


def choose_ours(out: dict) -> dict:
    """``ours`` of a row: the faster of the course kernels that ran and passed the correctness check (``ours_is``
    names it); the row passes only if every course kernel that ran passed (a wrong kernel is never hidden)."""
    check, ms = out["check"], out["ms"]
    ran = [c for c in COURSE if c in ms and "error" not in check.get(c, {"error": ""})]
    good = [c for c in ran if check[c].get("ok")]
    if good:
        best = min(good, key=lambda c: ms[c])
        ms["ours"], out["ours_is"] = ms[best], best
        check["ours"] = check[best]
    check["pass"] = bool(good) and len(good) == len(ran)
    return out


#: what ``ours`` is compared with in each row (ratio = ours' speed / theirs)
BASELINES = ("ours_triton", "ours_gluon", "fa4", "flash", "cudnn", "efficient", "naive")


def _ratio(r: dict, num: str, den: str):
    """(median, low, high) of num's time / den's: per interleaved round where the row has 2+ rounds of both
    (:func:`benchmarks.gluon_bench.timing.round_ratio`), else (x, x, x) from the two medians; None if one is absent."""
    ms, per = r.get("ms", {}), r.get("rounds_ms") or {}
    if num not in ms or den not in ms or not ms[den] > 0:
        return None
    if len(per.get(num) or ()) > 1 and len(per.get(den) or ()) > 1:
        got = timing.round_ratio(per, num, den)
        if got is not None:
            return got
    x = ms[num] / ms[den]
    return x, x, x


def add_verdicts(r: dict) -> dict:
    """ours/baseline speed ratios (per interleaved round where timed so: ``ratio_range`` their min and max), FA4's
    speed over cuDNN's, and, where an issue sets one, whether the row meets the target."""
    r["ratio"], r["ratio_range"] = {}, {}
    for b in BASELINES:
        got = _ratio(r, b, r.get("ours_is") or "ours") if "ours" in r.get("ms", {}) else None
        if got is not None:
            r["ratio"][b], r["ratio_range"][b] = got[0], [got[1], got[2]]
    fa4_cudnn = _ratio(r, "cudnn", "fa4")
    if fa4_cudnn is not None:
        r["fa4_vs_cudnn"] = fa4_cudnn[0]
    r["targets"] = {}
    for table_, min_n in ((TARGETS, TARGET_MIN_N), (FA4_TARGETS, FA4_TARGET_MIN_N)):
        for (mode, base), need in table_.items():
            if table_ is FA4_TARGETS and base not in r["ratio"]:
                continue                            # FA4 is optional: no verdict where its column is absent
            if mode == r["mode"] and r["n"] >= min_n:
                got = r["ratio"].get(base)
                r["targets"][base] = {"need": need, "got": got, "met": got is not None and got >= need}
    return r


#: configurations of our kernels tried after the grid, with whatever budget is left (GPU tuning data):
#: (mode, block_m, block_n, num_warps, num_stages); None = the kernel's default
SWEEP = [("fwd", 128, 64, 4, 3), ("fwd", 128, 128, 8, 3), ("fwd", 128, 64, 8, 4), ("fwd", 64, 64, 4, 4),
         ("bwd", 64, 64, 4, 3), ("bwd", 32, 128, 4, 4), ("bwd", 128, 64, 8, 3), ("bwd", 64, 128, 8, 2)]


def sweep_one(mode, d, causal, bm, bn, warps, stages, n=8192, dtype="float16", timer=None, device="cuda"):
    """Time our fwd or bwd at one (block_m, block_n, num_warps, num_stages); error vs SDPA flash's output."""
    import torch
    flash_backward, flash_forward = kernels.flash_backward, kernels.flash_forward
    timer = timer or (lambda fn: bench(fn, warmup=10, rep=40))
    B, H = max(1, TOKENS // n), WIDTH // d
    torch.manual_seed(n + d + causal)
    q, k, v, do = (torch.randn(B, H, n, d, device=device, dtype=getattr(torch, dtype)) for _ in range(4))
    kw = dict(causal=causal, block_m=bm, block_n=bn, num_warps=warps, num_stages=stages)
    o, lse = flash_forward(q, k, v, **kw) if mode == "fwd" else flash_forward(q, k, v, causal=causal)
    ref = implementation("flash")(q, k, v, causal)
    if mode == "fwd":
        ms = timer(lambda: flash_forward(q, k, v, **kw))
        err = _rel_err(o, ref.double())
    else:
        dq, _, _ = flash_backward(q, k, v, o, lse, do, **kw)
        qs = q.detach().requires_grad_()
        gq, = torch.autograd.grad(implementation("flash")(qs, k, v, causal), (qs,), do)
        err = _rel_err(dq, gq.double())
        ms = timer(lambda: flash_backward(q, k, v, o, lse, do, **kw))
    f = flops(mode, B, H, n, d, causal)
    out = dict(mode=mode, dtype=dtype, d=d, causal=causal, n=n, block_m=bm, block_n=bn, num_warps=warps,
               num_stages=stages, ms=float(ms), tflops=f / ms / 1e9, err_vs_sdpa_flash=err)
    return out


# --- run, record ----------------------------------------------------------------------------------------------

def versions(command: str | None = None) -> dict:
    backend = select_backend()
    info = run_info(command)
    if info["gpu"] is None:
        info["note"] = f"no CUDA GPU: Triton interpreter ({backend.reason}); timings are meaningless"
    ok, why = fa4.available("cuda" if info["gpu"] else "cpu")
    info["flash_attn_4"] = fa4.version() if ok else f"absent: {why}"
    return info


def save(result: dict, path: str, md: bool = False) -> None:
    """The JSON at path (written whole, then renamed); ``md``: its markdown table beside it (path's .md)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, indent=1)
    os.replace(tmp, path)
    if md:
        with open(tmp, "w") as f:
            f.write(markdown(result, os.path.basename(path)))
        os.replace(tmp, os.path.splitext(path)[0] + ".md")


def fmt(x, spec=".0f", none="-"):
    return none if x is None else format(x, spec)


def fa4_verdict(r: dict) -> str:
    """FA4's correctness in a row: "ok", "BAD" (over 2x torch's error, or not finite), "err" (raised), "-" (absent)."""
    c = r.get("check", {}).get("fa4")
    if c is None:
        return "-"
    return "err" if "error" in c else ("ok" if c.get("ok") else "BAD")


def table(rows: list[dict]) -> str:
    head = ("mode dtype     d causal     N   B   H |   ours ours_t ours_g    fa4  flash  cudnn   eff  naive | "
            "ours/fla ours/cud ours/fa4 fa4/cud | ok  fa4 targets")
    lines = [head, "-" * len(head)]
    for r in rows:
        t = r.get("tflops", {})
        tg = r.get("targets", {})
        verdict = " ".join(f"{b}:{'met' if v['met'] else 'MISS'}" for b, v in tg.items()) or f"(N<{TARGET_MIN_N})"
        lines.append(f"{r['mode']:4} {r['dtype']:8} {r['d']:3} {str(r['causal']):6} {r['n']:5} {r['batch']:3} "
                     f"{r['heads']:3} | " + " ".join(f"{fmt(t.get(i)):>6}" for i in IMPLS) + " | "
                     f"{fmt(r['ratio'].get('flash'), '.2f'):>8} {fmt(r['ratio'].get('cudnn'), '.2f'):>8} "
                     f"{fmt(r['ratio'].get('fa4'), '.2f'):>8} {fmt(r.get('fa4_vs_cudnn'), '.2f'):>7} | "
                     f"{'ok' if r['check']['pass'] else 'BAD':3} {fa4_verdict(r):3} {verdict}")
    return "\n".join(lines)


def run(args) -> dict:
    import torch
    from tqdm import tqdm
    rows = make_grid(args.quick, ns=args.ns, ds=args.ds or (64, 128), modes=args.modes or ("fwd", "bwd"))
    if args.only_dtype:
        rows = [r for r in rows if r["dtype"] == args.only_dtype]
    date = time.strftime("%Y-%m-%d", time.gmtime())
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, f"attention_speed_{date}.json")
    result = {"versions": versions(args.command), "args": vars(args), "tflops_convention":
              "4*B*H*N^2*d fwd, x0.5 causal, x2.5 bwd; time = median of triton.testing.do_bench"
              + (f", median over {args.rounds} interleaved rounds; ratios: median of the per-round ratios"
                 if args.rounds > 1 else ""),
              "rounds": args.rounds,
              "targets": {f"{m} ours/{b}": v for (m, b), v in TARGETS.items()}, "target_min_n": TARGET_MIN_N,
              "fa4_targets": {f"{m} ours/{b}": v for (m, b), v in FA4_TARGETS.items()},
              "fa4_target_min_n": FA4_TARGET_MIN_N, "rows": [], "skipped": [], "complete": False}
    print(json.dumps(result["versions"]), flush=True)
    t0 = time.time()
    bar = tqdm(rows, desc="attention_speed", file=sys.stdout, mininterval=5)
    for i, row in enumerate(bar):
        if time.time() - t0 > args.budget_s:
            result["skipped"] = rows[i:]
            bar.write(f"budget of {args.budget_s:.0f} s spent: {len(rows) - i} rows not run")
            break
        r = time_row(row, naive_max_n=args.naive_max_n, warmup=args.warmup, rep=args.rep, rounds=args.rounds)
        r["elapsed_s"] = round(time.time() - t0, 1)
        result["rows"].append(r)
        save(result, path, md=True)
        bar.write(table([r]).splitlines()[-1] + (f"  errors: {r['errors']}" if r["errors"] else ""))
        torch.cuda.empty_cache() if torch.cuda.is_available() else None
    else:
        result["complete"] = True
    result["sweep"] = []
    if args.sweep and result["complete"]:
        todo = [(m, d, c) + cfg[1:] for cfg in SWEEP for d in (64, 128) for c in (False, True)
                for m in (cfg[0],)]
        for cfg in todo:
            if time.time() - t0 > args.budget_s:
                bar.write(f"budget spent: {len(todo) - len(result['sweep'])} sweep configs not run")
                break
            try:
                r = sweep_one(*cfg)
            except Exception as exc:
                r = dict(zip(("mode", "d", "causal", "block_m", "block_n", "num_warps", "num_stages"), cfg),
                         error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}")
            result["sweep"].append(r)
            save(result, path)
            print("sweep", json.dumps(r), flush=True)
    result["wall_s"] = round(time.time() - t0, 1)
    save(result, path, md=True)
    print(f"\nwrote {path} ({len(result['rows'])}/{len(rows)} rows, {result['wall_s']} s)\n")
    print(table(result["rows"]))
    print(summary(result))
    return result


def summary(result: dict) -> str:
    rows = result["rows"]
    tg = [(r, b, v) for r in rows for b, v in r.get("targets", {}).items()]
    met = sum(v["met"] for _, _, v in tg)
    lines = [f"correctness: {sum(r['check']['pass'] for r in rows)}/{len(rows)} rows pass (ours <= 2x torch's error)",
             f"targets (N >= {TARGET_MIN_N}; against FA4 N >= {FA4_TARGET_MIN_N}): {met}/{len(tg)} met"]
    for (mode, base), need in {**TARGETS, **FA4_TARGETS}.items():
        got = [v["got"] for r, b, v in tg if r["mode"] == mode and b == base and v["got"] is not None]
        if got:
            lines.append(f"  {mode} ours/{base} >= {need}: {sum(g >= need for g in got)}/{len(got)} rows; "
                         f"{_spread(got)}")
    verdicts = [fa4_verdict(r) for r in rows]
    if any(x != "-" for x in verdicts):
        lines.append(f"FA4 correct (<= 2x torch's error): {verdicts.count('ok')}/{len(rows)} rows")
        for mode in ("fwd", "bwd"):
            for what, key in (("FA4/cuDNN", None), ("ours/FA4", "fa4")):
                got = [r.get("fa4_vs_cudnn") if key is None else r["ratio"].get(key) for r in rows
                       if r["mode"] == mode]
                got = [x for x in got if x is not None]
                if got:
                    lines.append(f"  {mode} {what} (speed): {_spread(got)} over {len(got)} rows")
    absent = {why for r in rows for why in (r.get("absent") or {}).values()}
    lines += [f"FA4 column absent: {why}" for why in sorted(absent)]
    return "\n".join(lines)


def _spread(xs) -> str:
    xs = sorted(xs)
    return f"min {xs[0]:.2f}, median {xs[len(xs) // 2]:.2f}, max {xs[-1]:.2f}"


# --- figure and markdown (no GPU needed) --------------------------------------------------------------------

def plot(result: dict, figure: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = result["rows"]
    panels = [(d, c) for d in (64, 128) for c in (False, True)]
    fig, axes = plt.subplots(2, 4, figsize=(17, 7.5), sharex=True)
    colors = {"ours": "C3", "ours_triton": "C4", "ours_gluon": "C5", "fa4": "C6", "flash": "C0", "cudnn": "C2",
              "efficient": "C1", "naive": "C7"}
    for i, mode in enumerate(("fwd", "bwd")):
        for j, (d, causal) in enumerate(panels):
            ax = axes[i, j]
            for dt, style in (("float16", "-"), ("bfloat16", "--")):
                sel = sorted((r for r in rows if r["mode"] == mode and r["d"] == d and r["causal"] == causal
                              and r["dtype"] == dt), key=lambda r: r["n"])
                for name in IMPLS:
                    pts = [(r["n"], r["tflops"][name]) for r in sel if name in r.get("tflops", {})]
                    if pts:
                        ax.plot(*zip(*pts), style, marker="o", ms=3, color=colors[name],
                                lw=2.2 if name == "ours" else 1.2,
                                label=f"{name} ({'fp16' if dt == 'float16' else 'bf16'})")
            ax.set_xscale("log", base=2)
            ax.set_title(f"{mode}, d={d}{', causal' if causal else ''}", fontsize=10)
            ax.grid(alpha=0.3)
            if j == 0:
                ax.set_ylabel("TFLOP/s (FA2 convention)")
            if i == 1:
                ax.set_xlabel("N (batch = 16384/N, heads = 2048/d)")
            ax.set_ylim(bottom=0)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=8, frameon=False)
    v = result["versions"]
    fa4_note = ("FlashAttention-4 and " if any("fa4" in r.get("tflops", {}) for r in rows) else "")
    fig.suptitle(f"Attention speed on {v.get('gpu')}: flashsim's kernels (ours: the faster) vs {fa4_note}PyTorch SDPA "
                 f"backends (torch {v.get('torch')}, triton {v.get('triton')}, {v.get('date_utc', '')[:10]})",
                 fontsize=11)
    fig.tight_layout(rect=(0, 0.07, 1, 0.96))
    os.makedirs(os.path.dirname(os.path.abspath(figure)), exist_ok=True)
    fig.savefig(figure, dpi=110)
    plt.close(fig)


def ratio_text(r: dict, base: str) -> str:
    """ours/base in a markdown cell: the ratio, and its min-max over the interleaved rounds where they differ."""
    x = r.get("ratio", {}).get(base)
    if x is None:
        return "-"
    lo, hi = (r.get("ratio_range") or {}).get(base, (x, x))
    return f"{x:.2f}" + ("" if lo == hi else f" ({lo:.2f}-{hi:.2f})")


def markdown(result: dict, json_name: str, figure: str | None = None) -> str:
    """The run as a markdown page: versions, command, summary and the table; ``figure``: the figure drawn from it,
    where one was."""
    v = result["versions"]
    out = [f"# Attention speed on {v.get('gpu')}: ours vs FlashAttention-4, PyTorch SDPA (flash, cuDNN, efficient) "
           "and naive", "",
           f"- date (UTC): {v.get('date_utc')}; GPU: {v.get('gpu')} ({v.get('sms')} SMs); nvidia-smi "
           f"(driver, SM/mem clocks, max SM clock, power limit): {v.get('driver') or v.get('driver_clocks')}",
           f"- python {v.get('python')}, torch {v.get('torch')} (CUDA {v.get('cuda')}, cuDNN {v.get('cudnn')}), "
           f"triton {v.get('triton')}, numpy {v.get('numpy')}, flash-attn-4 {v.get('flash_attn_4', '-')}",
           f"- command: `{v.get('command')}`",
           f"- full numbers: `{json_name}`" + (f"; figure: `{figure}`" if figure else ""),
           f"- {result['tflops_convention']}; rows: {len(result['rows'])}"
           + ("" if result.get("complete") else f" (run cut short: {len(result.get('skipped', []))} rows not run)"),
           "", "## Summary", "", "```", summary(result), "```", "",
           "## Table (TFLOP/s; ratios = ours' speed / baseline's speed)", "",
           "| mode | dtype | d | causal | N | B | H | ours | ours_triton | ours_gluon | FA4 | flash | cuDNN | "
           "efficient | naive | ours/flash | ours/cuDNN | ours/FA4 | FA4/cuDNN | ours is | correct | FA4 correct | "
           f"targets (N >= {TARGET_MIN_N}; FA4: N >= {FA4_TARGET_MIN_N}) |",
           "|" + "---|" * 23]
    for r in result["rows"]:
        t = r.get("tflops", {})
        tg = "; ".join(f"{b} {v['got']:.2f} vs {v['need']}: "
                       + ("met" if v["met"] else f"MISS by {100 * (1 - v['got'] / v['need']):.0f}%")
                       if v["got"] is not None else f"{b}: no number" for b, v in r.get("targets", {}).items())
        out.append(f"| {r['mode']} | {r['dtype']} | {r['d']} | {r['causal']} | {r['n']} | {r['batch']} | "
                   f"{r['heads']} | " + " | ".join(fmt(t.get(i)) for i in IMPLS) + " | "
                   + " | ".join(ratio_text(r, b) for b in ("flash", "cudnn", "fa4")) + " | "
                   f"{fmt(r.get('fa4_vs_cudnn'), '.2f')} | {r.get('ours_is', '-')} | "
                   f"{'yes' if r['check']['pass'] else 'NO'} | {fa4_verdict(r)} | {tg or '-'} |")
    sweep = result.get("sweep") or []
    if sweep:
        out += ["", "## Sweep: our kernels at other block sizes / warps / stages (fp16, N=8192, B=2)", "",
                "| mode | d | causal | block_m | block_n | num_warps | num_stages | TFLOP/s | error vs SDPA-flash |",
                "|" + "---|" * 9]
        out += [f"| {w['mode']} | {w['d']} | {w['causal']} | "
                f"{w['block_m']} | {w['block_n']} | {w['num_warps']} | "
                f"{w['num_stages']} | {fmt(w.get('tflops'))} | {fmt(w.get('err_vs_sdpa_flash'), '.1e')} |"
                for w in sweep]
    if result.get("notes"):
        out += ["", "## Notes", ""] + list(result["notes"])
    errs = [(r, name, e) for r in result["rows"] for name, e in r.get("errors", {}).items()]
    if errs:
        out += ["", "## Implementations that did not run", ""]
        out += [f"- {r['mode']} {r['dtype']} d={r['d']} causal={r['causal']} N={r['n']}: {name}: {e}"
                for r, name, e in errs]
    return "\n".join(out) + "\n"


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(","))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(HERE, "benchmarks", "results"), help="folder for the JSON")
    ap.add_argument("--quick", action="store_true", help="fp16 only, N in {1024, 4096, 16384}")
    ap.add_argument("--only-dtype", choices=("float16", "bfloat16"))
    ap.add_argument("--ns", type=_ints, help="comma-separated sequence lengths (default: the grid's)")
    ap.add_argument("--ds", type=_ints, help="comma-separated head dims (default: 64,128)")
    ap.add_argument("--modes", type=lambda x: tuple(x.split(",")), help="fwd, bwd or fwd,bwd (default)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="interleaved timing rounds per row: each implementation once per round, in a fresh order")
    ap.add_argument("--budget-s", type=float, default=1e9, help="start no new row after this many seconds")
    ap.add_argument("--warmup", type=float, default=10, help="do_bench warm-up, ms")
    ap.add_argument("--rep", type=float, default=40, help="do_bench repetition time, ms")
    ap.add_argument("--naive-max-n", type=int, default=4096, help="naive (O(N^2) memory) only up to this N")
    ap.add_argument("--sweep", action="store_true",
                    help="after the grid, with the budget left: time our kernels at other blocks/warps/stages")
    ap.add_argument("--command", help="the command line to record (default: this process's argv)")
    ap.add_argument("--plot-only", metavar="FILE.json", help="no timing: draw --figure (and --markdown) from FILE")
    ap.add_argument("--figure", default=os.path.join(HERE, "figures", "speed_h200.png"))
    ap.add_argument("--markdown", help="with --plot-only: also write this markdown table")
    args = ap.parse_args(argv)
    if args.plot_only:
        with open(args.plot_only) as f:
            result = json.load(f)
        for r in result["rows"]:
            add_verdicts(r)
        plot(result, args.figure)
        print(f"wrote {args.figure}")
        if args.markdown:
            with open(args.markdown, "w") as f:
                f.write(markdown(result, os.path.basename(args.plot_only), os.path.relpath(args.figure, HERE)))
            print(f"wrote {args.markdown}")
        print(table(result["rows"]))
        print(summary(result))
        return result
    return run(args)


if __name__ == "__main__":
    main()
