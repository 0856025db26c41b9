"""Register spills of the course's Triton forward at 128x128 tiles, 4 warps against 8 (issue 13's one
unexplained flash_fwd write miss: N=10240 causal d=64, block 128x128, 1.9 MiB written beyond O and LSE;
results: benchmarks/results/fwd_spill_h200_2026-12-02.md).

For each shape: the kernel's registers and spill bytes as compiled (``CompiledKernel.n_regs``/``n_spills``), its
output checked against a float64 reference on random inputs, then its time (``triton.testing.do_bench`` median,
the two launch options in alternating rounds). ``--ncu-one WARPS`` runs one shape's forward once with that many
warps, to run under ncu (its local-memory and DRAM counters).

    PYTHONPATH=$PWD python3 benchmarks/experiments/fwd_spill_h200.py --out $OUT/fwd_spill.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402

from flashsim.kernels import flash_forward  # noqa: E402
from flashsim.kernels.flash_fwd import _flash_fwd_kernel  # noqa: E402

#: (B, H, N, d, causal): the miss, the two other 128x128 d=64 configurations of the fidelity sweep, and more
SHAPES = [(1, 8, 10240, 64, True), (1, 4, 3000, 64, False), (1, 4, 12288, 64, False), (1, 8, 8192, 64, True),
          (4, 16, 4096, 64, True), (4, 16, 4096, 64, False)]


#: pointer loads and stores (``--tma``: tensor descriptors), as the fidelity sweep's kernel_runner launches them
TMA = "--tma" in sys.argv


def _inputs(B, H, N, d):
    g = torch.Generator(device="cuda").manual_seed(0)
    return [torch.randn((B, H, N, d), generator=g, device="cuda", dtype=torch.float16) for _ in range(3)]


def _run(q, k, v, causal, warps):
    return flash_forward(q, k, v, causal=causal, block_m=128, block_n=128, num_warps=warps, gluon=False,
                         tma=TMA)


def _compiled(warps: int, causal: bool) -> dict:
    """n_regs / n_spills of every forward compiled so far with ``warps`` warps (the JIT cache; shapes share
    kernels, so a row lists the variants compiled up to it, not only its own)."""
    out = {}
    for cache in getattr(_flash_fwd_kernel, "device_caches", {}).values():
        kernels = cache[0] if isinstance(cache, tuple) else cache
        for ck in kernels.values():
            md = ck.metadata
            if getattr(md, "num_warps", None) != warps:
                continue
            src = str(getattr(ck, "src", "")) + str(getattr(md, "name", ""))
            out.setdefault("kernels", []).append({"n_regs": getattr(ck, "n_regs", None),
                                                  "n_spills": getattr(ck, "n_spills", None), "name": src[:80]})
    return out


def _error(o, q, k, v, causal) -> float:
    qd, kd, vd = (t[:, :1].double() for t in (q, k, v))          # one head, float64
    s = qd @ kd.transpose(-1, -2) * q.shape[-1] ** -0.5
    if causal:
        n = q.shape[2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    ref = torch.softmax(s, -1) @ vd
    return float((o[:, :1].double() - ref).abs().max())


def main(argv=None) -> int:
    import triton.testing
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="fwd_spill.json")
    ap.add_argument("--ncu-one", type=int, default=None, help="num_warps: run SHAPES[0] once (for ncu) and exit")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tma", action="store_true", help="tensor-descriptor loads (default: pointers)")
    a = ap.parse_args(argv)
    if a.ncu_one:
        B, H, N, d, causal = SHAPES[0]
        q, k, v = _inputs(B, H, N, d)
        _run(q, k, v, causal, a.ncu_one)
        torch.cuda.synchronize()
        return 0
    rows = []
    for B, H, N, d, causal in SHAPES:
        q, k, v = _inputs(B, H, N, d)
        row = {"B": B, "H": H, "N": N, "d": d, "causal": causal}
        for w in (4, 8):
            o, _ = _run(q, k, v, causal, w)
            row[f"err_w{w}"] = _error(o, q, k, v, causal)
        row["compiled"] = {w: _compiled(w, causal) for w in (4, 8)}
        times = {4: [], 8: []}
        for r in range(a.rounds):
            for w in ((4, 8) if r % 2 == 0 else (8, 4)):
                times[w].append(triton.testing.do_bench(lambda: _run(q, k, v, causal, w), warmup=10, rep=30,
                                                        return_mode="median"))
        row.update(ms_w4=statistics.median(times[4]), ms_w8=statistics.median(times[8]),
                   speedup_w8=statistics.median(t4 / t8 for t4, t8 in zip(times[4], times[8])))
        rows.append(row)
        print(f"N={N} d={d} causal={causal}: err w4 {row['err_w4']:.2e} w8 {row['err_w8']:.2e}; "
              f"{row['ms_w4']:.3f} ms (4 warps) {row['ms_w8']:.3f} ms (8 warps), x{row['speedup_w8']:.3f}", flush=True)
    info = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
            "triton": __import__("triton").__version__}
    with open(a.out, "w") as f:
        json.dump({"info": info, "rows": rows}, f, indent=1, default=str)
    print(json.dumps([{k: r[k] for k in ("N", "causal", "compiled")} for r in rows], default=str)[:3000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
