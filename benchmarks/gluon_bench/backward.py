"""The Gluon backward's part of benchmarks/gluon_validate.py (``--bwd``): its correctness grid, the candidate
configurations (``--tune``), forward configurations per N and per row (``--fwd-by-n``, ``--tune-fwd-rows``), the
per-entry overrides of the command line (``--bwd-override``, ``--fwd-override``, ``--fwd-beside``) and the same-run
table of forward and backward rows."""
from __future__ import annotations

import json
import math
import os
import re
import sys
import time
import traceback
from pathlib import Path

from . import fa4, timing
from .checks import gpu64_grads, grads_of, sdpa_grads, check_bwd_case, check_case, reference, rel_err
from .forward import ratio_cell, tflops_cell
from .loading import load_gluon, versions
from .timing import (bench, bench_unpoisoned, bwd_flops, bwd_fn, bwd_sdpa_fn, flops, put_ratio, round_ratio,
                     sdpa_fn, time_fns, time_rounds)

#: backward configurations tried by --tune (keys of flashsim.kernels.gluon.BWD_CONFIGS), per head dim
BWD_CANDIDATES = {
    (64, False): [{}, dict(BLOCK_M=64, STAGES=3)],
    (64, True): [{}, dict(BLOCK_M=64, STAGES=2)],
    (128, False): [{}, dict(LSE_SMEM=True), dict(LSE_SMEM=True, STAGES=3)],
    (128, True): [{}, dict(LSE_SMEM=True), dict(LSE_SMEM=True, STAGES=3)],
}


#: forward overrides tried by --fwd-by-n, per (d, causal), at N = 2048 and 16384 (fp16)
FWD_BY_N_CANDIDATES = {
    (64, False): [dict(PINGPONG=False)],
    (64, True): [dict(PINGPONG=False), dict(NC=3, STAGES=3, CONSUMER_REGS=160)],
    (128, False): [dict(PINGPONG=False)],
    (128, True): [dict(PINGPONG=False), dict(L2_SECTION_BYTES=1 << 40), dict(PINGPONG=False, L2_SECTION_BYTES=1 << 40),
                  dict(PINGPONG=True, L2_SECTION_BYTES=16 << 20)],
}


def bwd_time_row(g, flash_backward, dtype, d, causal, N, warmup, rep, configs=None, with_triton=True,
                 flash_forward=None, fwd_committed=None):
    """The backward, timed: cuDNN, SDPA-flash (autograd.grad on a saved graph), Triton, Gluon (each config); and the
    forward on the same inputs: cuDNN, SDPA-flash, Gluon, the Triton forward (``flash_forward`` given) and, in fp16
    rows, the Gluon forward with ping-pong off (the ablation chapter 14 shows); ``fwd_committed`` (a full forward
    configuration): also the forward under it (``gluon_committed_fwd``), where the run adopted another one for this
    row (``--fwd-adopted``), and gluon_fwd_vs_committed, the per-round ratio of the two.
    FlashAttention-4 (``fa4``, ``fa4_fwd``; optional: where it is missing, ``fa4_absent`` says why) is checked on
    the same head against the same float64 gradients and output (``fa4_correct``, ``fa4_fwd_correct``) and timed
    beside the others."""
    import torch
    from torch.nn.attention import SDPBackend
    B, H = 16384 // N, 2048 // d
    torch.manual_seed(N + d + 1)
    q, k, v, do = (torch.randn(B, H, N, d, device="cuda", dtype=dtype) for _ in range(4))
    row = dict(dtype=str(dtype).replace("torch.", ""), d=d, causal=causal, N=N, B=B, H=H)
    fl = bwd_flops(B, H, N, d, causal)
    o, lse = g.gluon_forward(q, k, v, causal=causal)
    # correctness of this row on its own inputs, one head, against float64 torch on the GPU
    hs = slice(0, 1)
    dq, dk, dv = g.gluon_backward(q, k, v, o, lse, do, causal=causal)
    gref = gpu64_grads(q[:1, hs], k[:1, hs], v[:1, hs], do[:1, hs], causal, d ** -0.5)
    gt = sdpa_grads(q[:1, hs], k[:1, hs], v[:1, hs], do[:1, hs], causal)[1:]
    row["err"] = [rel_err(a[:1, hs], r) for a, r in zip((dq, dk, dv), gref)]
    row["err_torch"] = [rel_err(a, r) for a, r in zip(gt, gref)]
    row["correct"] = bool(all(e <= 2 * et + 1e-6 for e, et in zip(row["err"], row["err_torch"])))
    fa4_out = _fa4_check(row, q, k, v, do, causal, hs, gref)   # (o, dq, dk, dv) on the head, or None
    del gref, gt, dq, dk, dv
    # the forward of this row: its output on one head against float64 torch, then timed below
    qh, kh, vh = (t[:1, hs].double() for t in (q, k, v))
    sc = (qh @ kh.transpose(-1, -2)) * d ** -0.5
    if causal:
        sc = sc.masked_fill(torch.ones(N, N, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    oref = torch.softmax(sc, -1) @ vh
    del sc
    row["fwd_err"], row["fwd_err_torch"] = rel_err(o[:1, hs], oref), rel_err(sdpa_grads(
        q[:1, hs], k[:1, hs], v[:1, hs], do[:1, hs], causal)[0], oref)
    row["fwd_correct"] = bool(row["fwd_err"] <= 2 * row["fwd_err_torch"] + 1e-6)
    if fa4_out is not None:
        row["fa4_fwd_err"] = rel_err(fa4_out[0], oref)
        row["fa4_fwd_correct"] = bool(row["fa4_fwd_err"] <= 2 * row["fwd_err_torch"] + 1e-6)
    del oref, fa4_out
    fl_fwd = flops(B, H, N, d, causal)

    fwd_fns = {"cudnn_fwd": sdpa_fn(SDPBackend.CUDNN_ATTENTION, q, k, v, causal),
               "flash_fwd": sdpa_fn(SDPBackend.FLASH_ATTENTION, q, k, v, causal),
               "gluon_fwd": lambda: g.gluon_forward(q, k, v, causal=causal)}
    if flash_forward is not None:
        fwd_fns["triton_fwd"] = lambda: flash_forward(q, k, v, causal=causal, gluon=False)
    if dtype == torch.float16:
        fwd_fns["gluon_no_pingpong_fwd"] = lambda: g.gluon_forward(q, k, v, causal=causal, pingpong=False)
    if fwd_committed is not None:
        fwd_fns["gluon_committed_fwd"] = lambda: g.gluon_forward(q, k, v, causal=causal, config=fwd_committed)
    if "fa4_err" in row:
        fwd_fns["fa4_fwd"] = lambda: fa4.attention(q, k, v, causal)
    per = time_fns(row, fwd_fns, fl_fwd, warmup, rep, suffix="_fwd")
    if fwd_committed is not None:
        row["fwd_committed_config"] = fwd_committed
        put_ratio(row, "gluon_fwd_vs_committed", per, "gluon_committed_fwd", "gluon_fwd")
    row["fwd_config"] = g.forward_config(d, causal, N)

    fns = {}
    for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
        try:
            fns[name] = bwd_sdpa_fn(backend, q, k, v, do, causal)
        except Exception as exc:
            row[f"{name}_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    if "fa4_err" in row:
        fns["fa4"] = bwd_fn(fa4.attention, q, k, v, do, causal)
    if flash_backward is not None:
        if with_triton:
            fns["triton"] = lambda: flash_backward(q, k, v, o, lse, do, causal=causal, gluon=False)
        fns["gluon"] = lambda: flash_backward(q, k, v, o, lse, do, causal=causal, gluon=True)
    else:
        fns["gluon"] = lambda: g.gluon_backward(q, k, v, o, lse, do, causal=causal)
    if configs:
        # other configurations against the chosen one, both fed one precomputed delta (the kernel, dQ's zeroing
        # and rounding; no preprocess), so that only the configuration differs; and each one through the whole
        # flash_backward path as "gluon" is timed (NAME_full), for its ratio to cuDNN
        delta = (o.float() * do.float()).sum(-1)     # (B, H, N) fp32
        fns["gluon_chosen"] = lambda: g.gluon_backward(q, k, v, o, lse, do, delta, causal=causal)
        for name, cfg in configs.items():
            fns[name] = lambda cfg=cfg: g.gluon_backward(q, k, v, o, lse, do, delta, causal=causal, config=cfg)
            if flash_backward is not None:
                fns[f"{name}_full"] = lambda cfg=cfg: _with_bwd_config(
                    g, (d, causal), cfg, lambda: flash_backward(q, k, v, o, lse, do, causal=causal, gluon=True))
    per = time_fns(row, fns, fl, warmup, rep)
    for name in configs or ():
        for base in ("cudnn", "triton"):
            put_ratio(row, f"{name}_full_vs_{base}", per, base, f"{name}_full")
    return row


def _fa4_check(row, q, k, v, do, causal, hs, gref):
    """FA4's gradients on batch 0, head ``hs`` of the row's inputs against the float64 ones (``gref``), within 2x
    SDPA's error (``row["err_torch"]``): row["fa4_err"], row["fa4_correct"]; returns its (o, dq, dk, dv) on that
    head for the forward's check, or None where FA4 is absent (``fa4_absent``: why) or raised (``fa4_error``)."""
    ok, why = fa4.available(q.device.type)
    if not ok:
        row["fa4_absent"] = why
        return None
    try:
        out = [t[:1, hs] for t in grads_of(fa4.attention, q, k, v, do, causal)]
    except Exception as exc:
        row["fa4_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        return None
    row["fa4_err"] = [rel_err(a, r) for a, r in zip(out[1:], gref)]
    row["fa4_correct"] = bool(all(e <= 2 * et + 1e-6 for e, et in zip(row["fa4_err"], row["err_torch"])))
    return out


def _with_bwd_config(g, key, cfg, fn):
    """fn() while ``g.BWD_CONFIGS[key]`` is ``cfg``: the whole ``flash_backward(gluon=True)`` path (its delta
    preprocess included) under another configuration than the one the run chose."""
    old = g.BWD_CONFIGS[key]
    g.BWD_CONFIGS[key] = cfg
    try:
        return fn()
    finally:
        g.BWD_CONFIGS[key] = old


def bwd_table(rows) -> str:
    """The --bwd run's rows as printed text: backward TFLOP/s and ratios with FA4's columns ("-" where it did not
    run), then the forward's."""
    lines = ["\n dtype     d causal     N | cuDNN  flash triton  gluon    fa4  (bwd TFLOP/s) | g/cuDNN g/flash "
             "g/triton   g/fa4   t/fa4 fa4/cuD | ok fa4ok || fwd: cuDNN  gluon    fa4 g/cuDNN   g/fa4   t/fa4 ok"]
    for r in rows:
        t = " ".join(tflops_cell(r, f"{k}_tflops") for k in ("cudnn", "flash", "triton", "gluon", "fa4"))
        x = " ".join(ratio_cell(r, k) for k in ("gluon_vs_cudnn", "gluon_vs_flash", "gluon_vs_triton", "gluon_vs_fa4",
                                                "triton_vs_fa4", "fa4_vs_cudnn"))
        fwd = " ".join(tflops_cell(r, f"{k}_fwd_tflops") for k in ("cudnn", "gluon", "fa4"))
        fx = " ".join(ratio_cell(r, k) for k in ("gluon_fwd_vs_cudnn", "gluon_fwd_vs_fa4", "triton_fwd_vs_fa4"))
        lines.append(f" {r['dtype']:8s} {r['d']:3d} {str(r['causal']):6s} {r['N']:5d} |{t}               |{x} | "
                     f"{r.get('correct', r.get('error', '?'))} {r.get('fa4_correct', '-')} ||{fwd}{fx} "
                     f"{r.get('fwd_correct', '?')}")
    return "\n".join(lines)


def fwd_by_n(g, warmup, rep):
    """Forward overrides per (d, causal) at N = 2048 and 16384, fp16, against the current configuration."""
    import torch
    out = []
    for (d, causal), cands in FWD_BY_N_CANDIDATES.items():
        for N in (2048, 4096, 8192, 16384):
            B, H = 16384 // N, 2048 // d
            torch.manual_seed(N)
            q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=torch.float16) for _ in range(3))
            rec = dict(d=d, causal=causal, N=N, base=g.forward_config(d, causal, N), ms={})
            rec["ms"]["base"] = bench(lambda: g.gluon_forward(q, k, v, causal=causal), warmup, rep)
            for i, cand in enumerate(cands):
                try:
                    o, _ = g.gluon_forward(q[:, :1], k[:, :1], v[:, :1], causal=causal, config=cand)
                    ref, _ = reference(q[:1, :1, :1024], k[:1, :1, :1024], v[:1, :1, :1024], causal, d ** -0.5) \
                        if N <= 2048 else (None, None)
                    if ref is not None:
                        o2, _ = g.gluon_forward(q[:1, :1, :1024], k[:1, :1, :1024], v[:1, :1, :1024], causal=causal,
                                                config=cand)
                        if not rel_err(o2, ref) <= 4e-3:
                            raise RuntimeError(f"wrong: {rel_err(o2, ref)}")
                    full = dict(g.FWD_CONFIGS[(d, causal)], **cand)   # the candidate on the N-independent base
                    rec["ms"][json.dumps(cand)] = bench(
                        lambda full=full: g.gluon_forward(q, k, v, causal=causal, config=full), warmup, rep)
                except Exception as exc:
                    rec.setdefault("errors", {})[json.dumps(cand)] = f"{type(exc).__name__}: {str(exc)[:300]}"
            rec["base_vs_best"] = rec["ms"]["base"] / min(rec["ms"].values())
            print("fwd_by_n", rec)
            out.append(rec)
    return out


#: forward candidates that --tune-fwd-rows times in each row, per (d, causal): overrides on top of the row's current
#: configuration (``forward_config(d, causal, N)``); the current one with PINGPONG flipped is tried in every row too.
#: What the kernel supports: NC consumer warpgroups (3 only at d=64: registers), STAGES K/V ring slots (2 at d=128:
#: shared memory), and the persistent grid's tile order (L2_SECTION_BYTES: heads per L2 section; 1 << 40: one section,
#: the plain longest-first order)
FWD_ROW_CANDIDATES = {
    (64, False): [dict(STAGES=2), dict(STAGES=4)],
    (64, True): [dict(STAGES=3), dict(NC=3, STAGES=3, CONSUMER_REGS=160),
                 dict(NC=3, STAGES=3, CONSUMER_REGS=160, PINGPONG=True)],
    (128, False): [dict(L2_SECTION_BYTES=40 << 20)],
    (128, True): [dict(L2_SECTION_BYTES=1 << 40), dict(L2_SECTION_BYTES=40 << 20)],
}


def _fwd_check_one_head(g, q, k, v, causal, cfg):
    """(ok, err, err_torch): the forward under ``cfg`` on batch 0, head 0 of (q, k, v) against float64 torch on the
    GPU, within 2x the error of torch SDPA in the same dtype."""
    import torch
    import torch.nn.functional as F
    N, d = q.shape[-2:]
    q1, k1, v1 = (t[:1, :1] for t in (q, k, v))
    o, _ = g.gluon_forward(q1, k1, v1, causal=causal, config=cfg)
    sc = (q1.double() @ k1.double().transpose(-1, -2)) * d ** -0.5
    if causal:
        sc = sc.masked_fill(torch.ones(N, N, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    ref = torch.softmax(sc, -1) @ v1.double()
    del sc
    err, err_t = rel_err(o, ref), rel_err(F.scaled_dot_product_attention(q1, k1, v1, is_causal=causal), ref)
    return bool(err <= 2 * err_t + 1e-6), err, err_t


def tune_fwd_rows(g, previous, warmup, rep, budget_s, save, out):
    """Per table row that missed 1.0x cuDNN in ``previous`` (a --bwd table's JSON), both dtypes: the row's current
    forward configuration, the same with PINGPONG flipped and :data:`FWD_ROW_CANDIDATES`, each checked (ragged N =
    1000, then the row's own inputs on one head) and then timed with cuDNN in interleaved rounds
    (:func:`time_rounds`). A candidate *wins* a row when its median per-round speedup over the current configuration
    exceeds 1 by more than that speedup's min-max over the rounds (choosing and verifying on one run favours the
    winner, so a margin inside the noise is not taken). out["fwd_adopted"]: per (d, causal, N) the candidate with
    the largest median speedup among those that won in every dtype timed, as overrides of ``FWD_CONFIGS[(d,
    causal)]`` (what ``FWD_CONFIGS_BY_N`` would hold). Stops starting rows after ``budget_s`` seconds."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend
    t0 = time.time()
    prev = [r for r in json.load(open(previous))["rows"] if isinstance(r.get("gluon_fwd_vs_cudnn"), (int, float))]
    worst = {}
    for r in prev:
        key = (r["d"], bool(r["causal"]), r["N"])
        worst[key] = min(worst.get(key, 9.0), r["gluon_fwd_vs_cudnn"])
    keys = sorted((k for k, x in worst.items() if x < 1.0), key=lambda k: worst[k])
    out["fwd_row_tuning"], out["fwd_adopted"] = [], {}
    checked = {}
    for d, causal, N in keys:
        if time.time() - t0 > budget_s:
            out.setdefault("fwd_row_tuning_skipped", []).append([d, causal, N])
            continue
        current = g.forward_config(d, causal, N)
        cands = [dict(PINGPONG=not current["PINGPONG"])] + FWD_ROW_CANDIDATES.get((d, causal), [])
        fulls = [dict(current, **c) for c in cands]
        fulls = [f for i, f in enumerate(fulls) if f != current and f not in fulls[:i]]
        wins = {}
        for dtype in (torch.float16, torch.bfloat16):
            B, H = 16384 // N, 2048 // d
            torch.manual_seed(N + d + 2)
            q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=dtype) for _ in range(3))
            rec = dict(dtype=str(dtype).replace("torch.", ""), d=d, causal=causal, N=N, current=current,
                       candidates=[], previous_worst_vs_cudnn=worst[(d, causal, N)])
            fns = {"cudnn": sdpa_fn(SDPBackend.CUDNN_ATTENTION, q, k, v, causal),
                   "current": lambda: g.gluon_forward(q, k, v, causal=causal, config=current)}
            for i, full in enumerate(fulls):
                c = dict(config=full)
                try:
                    ck = (str(dtype), json.dumps(full, sort_keys=True), causal)
                    if ck not in checked:      # ragged N, host float64 reference
                        torch.manual_seed(5)
                        qs, ks, vs = (torch.randn(2, 3, 1000, d, device="cuda", dtype=dtype) for _ in range(3))
                        o, _ = g.gluon_forward(qs, ks, vs, causal=causal, config=full)
                        ref, _ = reference(qs, ks, vs, causal, d ** -0.5)
                        et = rel_err(F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal), ref)
                        checked[ck] = bool(rel_err(o, ref) <= 2 * et + 1e-6)
                    c["ok"], c["err"], c["err_torch"] = _fwd_check_one_head(g, q, k, v, causal, full)
                    c["ok"] = c["ok"] and checked[ck]
                except Exception as exc:
                    c.update(ok=False, error=f"{type(exc).__name__}: {str(exc)[:400]}")
                if c["ok"]:
                    fns[f"cand{i}"] = lambda full=full: g.gluon_forward(q, k, v, causal=causal, config=full)
                rec["candidates"].append(c)
            per, errors = time_rounds(fns, warmup, rep, seed=N + d)
            rec["rounds_ms"], rec["errors"] = per, errors
            rec["current_vs_cudnn"] = round_ratio(per, "cudnn", "current")
            for i, c in enumerate(rec["candidates"]):
                if f"cand{i}" not in fns or f"cand{i}" in errors:
                    continue
                c["vs_cudnn"] = round_ratio(per, "cudnn", f"cand{i}")
                c["speedup"] = sp = round_ratio(per, "current", f"cand{i}")     # (median, min, max) over rounds
                c["wins"] = bool(sp and sp[0] - 1 > sp[2] - sp[1])
                wins.setdefault(i, []).append(sp[0] if c["wins"] else None)
            print("tune_fwd_row", rec["dtype"], d, causal, N, "current/cuDNN", rec["current_vs_cudnn"],
                  [(json.dumps({kk: vv for kk, vv in c["config"].items() if current.get(kk) != vv}),
                    c.get("ok"), c.get("speedup"), c.get("wins")) for c in rec["candidates"]],
                  f"{time.time() - t0:.0f} s")
            out["fwd_row_tuning"].append(rec)
            save()
        good = [(math.prod(sps) ** (1 / len(sps)), i) for i, sps in wins.items() if len(sps) == 2 and all(sps)]
        if good:
            best = fulls[max(good)[1]]
            base = g.FWD_CONFIGS[(d, causal)]
            over = {kk: vv for kk, vv in best.items() if base.get(kk) != vv}
            out["fwd_adopted"][f"d{d}_causal{int(causal)}_N{N}"] = over
            print("adopted", d, causal, N, over)
        save()
    return out


def entry_overrides(spec: str | None, entries, flat_ok: bool = False) -> dict:
    """{(d, causal): overrides} from a command line's JSON ``{"d64_causal1": {...}, ...}`` over the configuration
    entries ``entries`` ((d, causal) keys). ``flat_ok``: a plain ``{...}`` applies to every entry. A name that is no
    entry raises ``ValueError`` naming the known ones (a typo must not time the committed kernel as the candidate)."""
    if not spec:
        return {}
    over = json.loads(spec)
    if not isinstance(over, dict):
        raise ValueError(f"overrides must be a JSON object, not {spec!r}")
    names = {f"d{d}_causal{int(c)}": (d, c) for d, c in entries}
    if flat_ok and over and not any(re.fullmatch(r"d\d+_causal[01]", k) for k in over):
        return {key: dict(over) for key in names.values()}
    unknown = sorted(set(over) - set(names))
    if unknown:
        raise ValueError(f"unknown configuration entries {unknown}: the entries are {sorted(names)}")
    if not all(isinstance(v, dict) for v in over.values()):
        raise ValueError(f"each entry's overrides must be a JSON object: {spec!r}")
    return {names[k]: dict(v) for k, v in over.items()}


def apply_fwd_adopted(g, adopted):
    """Put ``adopted`` ({"d64_causal1_N2048": overrides of FWD_CONFIGS, ...}, from --tune-fwd-rows) in front of
    ``g.FWD_CONFIGS_BY_N`` as exact-N ranges; returns {(d, causal, N): the full configuration it replaces}."""
    replaced = {}
    for key, over in adopted.items():
        m = re.fullmatch(r"d(\d+)_causal([01])_N(\d+)", key)
        d, causal, N = int(m.group(1)), m.group(2) == "1", int(m.group(3))
        replaced[(d, causal, N)] = g.forward_config(d, causal, N)
        g.FWD_CONFIGS_BY_N.setdefault((d, causal), []).insert(0, (N, N, dict(over)))
    return replaced


def bwd_main(args):
    import torch
    g, how = load_gluon()
    if args.ncu_bwd:
        dt, d, causal, N = args.ncu_bwd.split(",")
        dt, d, causal, N = dict(fp16=torch.float16, bf16=torch.bfloat16)[dt], int(d), bool(int(causal)), int(N)
        q, k, v, do = (torch.randn(16384 // N, 2048 // d, N, d, device="cuda", dtype=dt) for _ in range(4))
        o, lse = g.gluon_forward(q, k, v, causal=causal)
        # FLASHSIM_NCU_BWD_CONFIG (JSON): also profile the Gluon backward with these BWD_CONFIGS overrides
        extra = json.loads(os.environ.get("FLASHSIM_NCU_BWD_CONFIG", "null"))
        from torch.nn.attention import SDPBackend
        cudnn = bwd_sdpa_fn(SDPBackend.CUDNN_ATTENTION, q, k, v, do, causal)   # cuDNN's backward, for comparison
        runs = [lambda: g.gluon_backward(q, k, v, o, lse, do, causal=causal), cudnn]
        if fa4.available()[0]:                       # FA4's backward as well, where it imports (optional)
            runs.append(bwd_fn(fa4.attention, q, k, v, do, causal))
        if extra:
            runs.append(lambda: g.gluon_backward(q, k, v, o, lse, do, causal=causal, config=extra))
        for fn in runs:
            fn()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        for fn in runs:
            fn()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
        return 0
    ok, why = g.available()
    result = dict(date_utc=time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), command=" ".join(sys.argv),
                  loaded=how, available=ok, reason=why, checks=[], tuning=[], fwd_by_n=[], rows=[])
    print(f"gluon available: {ok} ({why})")

    def save():
        Path(args.out).write_text(json.dumps(result, indent=1))
    if not ok:
        save()
        return 1
    result["versions"] = versions()
    try:
        from flashsim.kernels import flash_backward, flash_forward
    except Exception as exc:
        flash_backward = flash_forward = None
        result["triton_kernel"] = f"unavailable: {type(exc).__name__}: {exc}"
    if args.tune_fwd_rows:
        tune_fwd_rows(g, args.tune_fwd_rows, args.warmup, args.rep, args.tune_budget_s, save, result)
    fwd_replaced = {}
    if args.fwd_adopted:
        try:    # a tuning run that timed out before its first adoption leaves none (or no file)
            result["fwd_adopted"] = json.load(open(args.fwd_adopted)).get("fwd_adopted") or {}
        except Exception as exc:
            result["fwd_adopted"], result["fwd_adopted_error"] = {}, f"{type(exc).__name__}: {exc}"
        fwd_replaced = apply_fwd_adopted(g, result["fwd_adopted"])
    if args.fwd_beside:
        # {"d128_causal1": {...}}: each timed row of that entry also times the forward with these overrides on top of
        # its configuration (gluon_committed_fwd), e.g. a feature switched off, for the ablation
        result["fwd_beside"] = json.loads(args.fwd_beside)
        for (d, c), over in entry_overrides(args.fwd_beside, g.FWD_CONFIGS).items():
            for N in (int(x) for x in args.ns.split(",")):
                fwd_replaced[(d, c, N)] = dict(g.forward_config(d, c, N), **over)
    if args.fwd_override:
        # {"d128_causal1": {...}}: on top of FWD_CONFIGS before the grid; each timed row times the configuration it
        # replaces beside it (gluon_committed_fwd)
        result["fwd_override"] = json.loads(args.fwd_override)
        for (d, c), over in entry_overrides(args.fwd_override, g.FWD_CONFIGS).items():
            for N in (int(x) for x in args.ns.split(",")):
                fwd_replaced.setdefault((d, c, N), g.forward_config(d, c, N))
            g.FWD_CONFIGS[(d, c)] = dict(g.FWD_CONFIGS[(d, c)], **over)
    # timing rounds per row: do_bench rounds, or with --timing calls the iterations, one call of each kernel each
    result["rounds"] = timing.ITERS if timing.MODE == "calls" else timing.ROUNDS
    result["timing"] = timing.MODE
    # the forward's configurations (as the forward-only run records them), and its overrides by N
    result["configs"] = {f"d{d}_causal{int(c)}": cfg for (d, c), cfg in g.FWD_CONFIGS.items()}
    result["configs_by_n"] = {f"d{d}_causal{int(c)}": ranges for (d, c), ranges in g.FWD_CONFIGS_BY_N.items()}
    t0 = time.time()
    # every option spelled out, so that timing "the committed configuration" beside an override (which
    # gluon_backward applies on top of BWD_CONFIGS) leaves none of the override in it
    committed_bwd = {key: dict(g.BWD_CONFIG_DEFAULTS, **cfg) for key, cfg in g.BWD_CONFIGS.items()}
    # ---- compile + correctness of every candidate (fp16, ragged N), then tuning at N = 2048 and 16384 ----
    if args.tune:
        for (d, causal), cands in BWD_CANDIDATES.items():
            if True:
                good = []
                for cand in cands:
                    rec = dict(d=d, causal=causal, config=cand, ok=True, checks=[], ms={})
                    try:
                        for i, N in enumerate((100, 1000)):
                            c = check_bwd_case(g, torch.float16, d, causal, 2, 3, N, config=cand, seed=i)
                            rec["checks"].append(c)
                            rec["ok"] &= c["ok"]
                        if rec["ok"]:
                            for N in (2048, 16384):
                                B, H = 16384 // N, 2048 // d
                                q, k, v, do = (torch.randn(B, H, N, d, device="cuda", dtype=torch.float16)
                                               for _ in range(4))
                                o, lse = g.gluon_forward(q, k, v, causal=causal)   # (B, H, N, d), (B, H, N)
                                run = lambda: g.gluon_backward(q, k, v, o, lse, do, causal=causal,  # noqa: E731
                                                               config=cand)
                                rec["ms"][N] = bench_unpoisoned(run, args.warmup, args.rep)
                            rec["geomean_ms"] = math.prod(rec["ms"].values()) ** (1 / len(rec["ms"]))
                            good.append((rec["geomean_ms"], cand))
                    except Exception as exc:
                        rec.update(ok=False, error=f"{type(exc).__name__}: {str(exc)[:1500]}")
                    print("tune_bwd", {k2: v2 for k2, v2 in rec.items() if k2 != "checks"},
                          [(c["N"], c["ok"], [round(e, 6) for e in c["err"]]) for c in rec["checks"]])
                    result["tuning"].append(rec)
                    save()
                if good:   # the fastest candidate, on top of the committed configuration
                    g.BWD_CONFIGS[(d, causal)] = dict(g.BWD_CONFIGS[(d, causal)], **min(good, key=lambda x: x[0])[1])
                print("chosen bwd", d, causal, g.BWD_CONFIGS[(d, causal)], f"{time.time() - t0:.0f} s")
    if args.bwd_override:
        for key, over in entry_overrides(args.bwd_override, g.BWD_CONFIGS, flat_ok=True).items():
            g.BWD_CONFIGS[key] = dict(g.BWD_CONFIGS[key], **over)
    result["bwd_configs"] = {f"d{d}_causal{int(c)}": cfg for (d, c), cfg in g.BWD_CONFIGS.items()}
    grid_what = set(args.grid.split(","))
    # ---- correctness grid with the chosen configurations ----
    for dtype in (torch.float16, torch.bfloat16):
        for d in (64, 128):
            for causal in (False, True):
                for i, N in enumerate((1, 17, 129, 1000, 2085)):
                    B, H = (2, 3) if N < 1024 else (1, 2)
                    for what, fn in (("bwd", check_bwd_case), ("fwd", check_case)):
                        if what not in grid_what:
                            continue
                        try:
                            c = dict(fn(g, dtype, d, causal, B, H, N, seed=10 + i), what=what)
                        except Exception as exc:
                            c = dict(dtype=str(dtype), d=d, causal=causal, N=N, ok=False, what=what,
                                     error=f"{type(exc).__name__}: {str(exc)[:1500]}")
                        result["checks"].append(c)
                        if not c["ok"]:
                            print("FAIL", c)
    n_ok = sum(c["ok"] for c in result["checks"])
    print(f"correctness (grid: {args.grid}): {n_ok}/{len(result['checks'])} cases pass "
          f"({time.time() - t0:.0f} s)")
    if (args.tune or args.bwd_override) and n_ok < len(result["checks"]):
        # a tuned choice failed the grid: back to the committed configurations (checked in earlier runs) for
        # the table, and say so
        bad = {(c["d"], c["causal"]) for c in result["checks"] if not c["ok"]}
        for key in bad:
            g.BWD_CONFIGS[key] = dict(committed_bwd[key])
        result["tuned_choice_failed_grid"] = sorted(map(str, bad))
        result["bwd_configs"] = {f"d{d}_causal{int(c)}": cfg for (d, c), cfg in g.BWD_CONFIGS.items()}
        print("tuned configurations failed the grid; committed ones used for", bad)
        n_ok = len(result["checks"])   # the table runs on configurations validated before
    save()
    if args.fwd_by_n:
        result["fwd_by_n"] = fwd_by_n(g, args.warmup, args.rep)
        save()
    if not args.no_timing and n_ok == len(result["checks"]):
        ns_t = [int(x) for x in args.ns.split(",")]
        dtypes = {"fp16": torch.float16, "bf16": torch.bfloat16}
        triton_bwd = {dtypes[x] for x in args.triton_bwd_dtypes.split(",")}
        for dtype in (dtypes[x] for x in args.dtypes.split(",")):
            for d in (int(x) for x in args.ds.split(",")):
                for causal in (bool(int(x)) for x in args.causals.split(",")):
                    for N in ns_t:
                        try:
                            extra = ({"gluon_committed": committed_bwd[(d, causal)]}
                                     if args.bwd_override and committed_bwd[(d, causal)] != g.BWD_CONFIGS[(d, causal)]
                                     else None)
                            r = bwd_time_row(g, flash_backward, dtype, d, causal, N, args.warmup, args.rep,
                                             configs=extra,
                                             with_triton=not args.no_triton and dtype in triton_bwd,
                                             flash_forward=None if args.no_triton else flash_forward,
                                             fwd_committed=fwd_replaced.get((d, causal, N)))
                        except Exception as exc:
                            r = dict(dtype=str(dtype), d=d, causal=causal, N=N,
                                     error=f"{type(exc).__name__}: {str(exc)[:600]}")
                            print(traceback.format_exc()[-1500:])
                        result["rows"].append(r)
                        save()
        print(bwd_table(result["rows"]))
    save()
    print(f"total {time.time() - t0:.0f} s")
    return 0

