"""Summarise ncu limiter profiles (``--set full``) of the Gluon kernels and cuDNN's: one block of numbers per kernel
and, for the Gluon kernels, where in the SASS the warps stall (per-instruction ``smsp__pcsamp`` samples grouped by
opcode, and the top instructions).

Input: the ``--page raw --csv`` and ``--page source --csv --print-source sass`` exports that
``benchmarks/experiments/gluon_limiter_run.sh`` writes next to each ``.ncu-rep``.

    python benchmarks/experiments/gluon_limiter_summary.py DIR > benchmarks/results/gluon_limiter_h200_<date>.txt
"""
from __future__ import annotations

import collections
import csv
import re
import sys
from pathlib import Path

RAW = {  # label: raw metric
    "gpu_time": "gpu__time_duration.sum",   # in the unit ncu prints (us or ms)
    "tensor_pipe_active_pct": "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "issue_active_pct": "sm__inst_issued.avg.pct_of_peak_sustained_active",
    "inst_executed": "smsp__inst_executed.sum",
    "warps_active_per_sm": "sm__warps_active.avg.per_cycle_active",
    "regs_per_thread": "launch__registers_per_thread",
    "local_ld_inst": "smsp__sass_inst_executed_op_local_ld.sum",
    "local_st_inst": "smsp__sass_inst_executed_op_local_st.sum",
    "smem_wavefronts_st": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "dram_pct": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "l2_hit_pct": "lts__t_sector_hit_rate.pct",
    "grid": "launch__grid_size",
    "smem_per_block": "launch__shared_mem_per_block_dynamic",
}
STALLS = ["barrier", "long_scoreboard", "wait", "selected", "not_selected", "short_scoreboard", "mio_throttle",
          "math_pipe_throttle", "dispatch_stall", "warpgroup_arrive", "lg_throttle", "branch_resolving",
          "no_instructions", "membar", "sleeping", "drain", "misc", "imc_miss", "tex_throttle"]


def _num(v):
    try:
        return float(str(v).replace(",", ""))
    except ValueError:
        return None


def raw_rows(path):
    rows = list(csv.reader(open(path)))
    hdr, data = rows[0], rows[2:]
    out = []
    for d in data:
        rec = dict(zip(hdr, d))
        name = rec.get("Kernel Name", "")
        if "attn_" not in name and "cudnn_generated" not in name:
            continue
        r = {"id": rec.get("ID"), "kernel": name[:70]}
        for k, m in RAW.items():
            r[k] = _num(rec.get(m, "nan"))
        samples = {s: _num(rec.get(f"smsp__pcsamp_warps_issue_stalled_{s}", "0")) or 0.0 for s in STALLS}
        tot = sum(samples.values()) or 1.0
        r["stall_pct"] = {s: 100 * v / tot for s, v in sorted(samples.items(), key=lambda x: -x[1]) if v}
        r["samples"] = tot
        out.append(r)
    return out


def source_blocks(path):
    """Per kernel in the source export: [(address, sass, samples, {stall: n})]."""
    blocks, cur, hdr = [], None, None
    for row in csv.reader(open(path)):
        if row and row[0] == "Kernel Name":
            cur = {"kernel": row[1], "lines": []}
            blocks.append(cur)
            hdr = None
            continue
        if cur is None:
            continue
        if hdr is None:
            hdr = row
            continue
        rec = dict(zip(hdr, row))
        n = _num(rec.get("Warp Stall Sampling (All Samples)", "0")) or 0.0
        st = {k[6:]: _num(v) or 0.0 for k, v in rec.items() if k.startswith("stall_") and "(Not" not in k}
        cur["lines"].append((rec.get("Address", ""), rec.get("Source", ""), n, st))
    return blocks


def opclass(sass):
    op = sass.strip().split()
    op = [t for t in op if not t.startswith("@")]
    if not op:
        return "?"
    o = op[0]
    base = o.split(".")[0]
    if base in ("HGMMA",):
        return "HGMMA (wgmma issue)"
    if base == "WARPGROUP":
        return "WARPGROUP.* (wgmma wait / arrive)"
    if base in ("BAR",):
        return "BAR (named barrier)"
    if base in ("SYNCS",):
        return "SYNCS (mbarrier wait/arrive)"
    if base in ("LDL", "STL"):
        return "LDL/STL (register spills)"
    if base == "MUFU":
        return "MUFU (exp2)"
    if base in ("STS", "STSM", "LDS", "LDSM"):
        return "STS/STSM/LDS (shared memory)"
    if base in ("LDG", "STG", "REDG", "RED", "ATOMG"):
        return "LDG/STG/RED (global)"
    if base.startswith("UTMA") or base.startswith("UBLKCP") or base.startswith("UBLKRED"):
        return "UTMA* (TMA issue)"
    if base in ("FFMA", "FMUL", "FADD", "FSEL", "F2FP", "FMNMX", "HADD2", "HMUL2", "FSETP"):
        return "FP32/FP16 ALU"
    return "other (" + base + ")"


def main(argv=None):
    d = Path((argv or sys.argv[1:])[0])
    for raw in sorted(d.glob("*.raw.csv")):
        print(f"### {raw.name[:-8]}")
        for r in raw_rows(raw):
            print(f"- [{r['id']}] {r['kernel']}")
            print("    " + ", ".join(f"{k}={r[k]:.4g}" for k in RAW if r[k] is not None))
            print("    stall samples (% of {:.0f}): ".format(r["samples"]) +
                  ", ".join(f"{s} {p:.1f}" for s, p in r["stall_pct"].items() if p >= 0.5))
        src = raw.with_name(raw.name.replace(".raw.csv", ".source_attn.csv"))
        if src.exists():
            for i, blk in enumerate(source_blocks(src)):
                lines = blk["lines"]
                tot = sum(n for _, _, n, _ in lines) or 1.0
                by = collections.defaultdict(lambda: [0.0, collections.Counter()])
                for _, sass, n, st in lines:
                    c = by[opclass(sass)]
                    c[0] += n
                    c[1].update(st)
                print(f"  SASS stall samples of {blk['kernel']} #{i} by instruction class (% of {tot:.0f}):")
                for cls, (n, st) in sorted(by.items(), key=lambda x: -x[1][0])[:10]:
                    top = ", ".join(f"{k} {100 * v / tot:.1f}" for k, v in st.most_common(3) if v)
                    print(f"    {100 * n / tot:5.1f}%  {cls:38s} [{top}]")
                print("  top instructions:")
                for addr, sass, n, st in sorted(lines, key=lambda x: -x[2])[:12]:
                    top2 = sorted(st.items(), key=lambda x: -x[1])[:2]
                    top = ", ".join(f"{k} {100 * v / tot:.1f}" for k, v in top2 if v)
                    sass1 = re.sub(r"\s+", " ", sass)[:70]
                    print(f"    {100 * n / tot:5.1f}%  {addr:>6s}  {sass1:70s} [{top}]")
        print()


if __name__ == "__main__":
    main()
