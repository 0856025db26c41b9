"""The Gluon forward's part of benchmarks/gluon_validate.py: its candidate launch configurations (``--tune``), one
timed row of the same-run table (cuDNN, SDPA-flash, the course's Triton forward, Gluon, ping-pong off, and FA4 where
it is installed), the table as text."""
from __future__ import annotations

import math

from . import fa4
from .checks import reference, rel_err
from .timing import bench, flops, sdpa_fn, time_fns

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


def time_row(g, flash_forward, dtype, d, causal, N, warmup, rep, ablation):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend
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
    ok, why = fa4.available(q.device.type)
    if not ok:
        row["fa4_absent"] = why
    else:                                        # FlashAttention-4, optional: the same check, then timed beside
        try:
            row["fa4_err"] = rel_err(fa4.attention(q, k, v, causal)[:, hs], ref)
            row["fa4_correct"] = bool(row["fa4_err"] <= 2 * row["err_torch"] + 1e-6)
        except Exception as exc:
            row["fa4_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    del ref, o_t

    fns = {"cudnn": sdpa_fn(SDPBackend.CUDNN_ATTENTION, q, k, v, causal),
           "flash": sdpa_fn(SDPBackend.FLASH_ATTENTION, q, k, v, causal),
           "gluon": lambda: g.gluon_forward(q, k, v, causal=causal)}
    if flash_forward is not None:
        fns["triton"] = lambda: flash_forward(q, k, v, causal=causal)
    if ablation:
        fns["gluon_no_pingpong"] = lambda: g.gluon_forward(q, k, v, causal=causal, pingpong=False)
    if "fa4_err" in row:
        fns["fa4"] = lambda: fa4.attention(q, k, v, causal)
    time_fns(row, fns, fl, warmup, rep)
    return row


def tflops_cell(row: dict, key: str) -> str:
    """row[key] as a 6-wide TFLOP/s cell of the printed tables ("-" where the row has none)."""
    v = row.get(key)
    return f"{v:6.0f}" if isinstance(v, (int, float)) else "     -"


def ratio_cell(row: dict, key: str) -> str:
    """row[key] as a 7-wide ratio cell of the printed tables ("-" where the row has none)."""
    v = row.get(key)
    return f"{v:7.2f}" if isinstance(v, (int, float)) else "      -"


def print_table(result):
    print("\n dtype     d causal     N | cuDNN  flash triton  gluon    fa4  (TFLOP/s) | g/cuDNN g/flash g/triton   "
          "g/fa4 fa4/cuD | noPP | ok fa4ok")
    for r in result["rows"]:
        t = " ".join(tflops_cell(r, f"{k}_tflops") for k in ("cudnn", "flash", "triton", "gluon", "fa4"))
        x = " ".join(ratio_cell(r, k) for k in ("gluon_vs_cudnn", "gluon_vs_flash", "gluon_vs_triton", "gluon_vs_fa4",
                                                "fa4_vs_cudnn"))
        print(f" {r['dtype']:8s} {r['d']:3d} {str(r['causal']):6s} {r['N']:5d} |{t}           |{x} "
              f"|{tflops_cell(r, 'gluon_no_pingpong_tflops')} | {r.get('correct', r.get('error', '?'))} "
              f"{r.get('fa4_correct', '-')}")

