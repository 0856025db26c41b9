"""Where a kernel's warps wait, from Nsight Compute's source-level samples, with the idle warps set apart.

ncu's warp-state summary names the top stall reason of a launch, but it counts every resident warp. The Gluon kernels
give their one-warp producer (and the backward's other one-warp partitions) a warpgroup of four warps: the others
have no work and sit at the kernel's closing barrier (``BAR.SYNC 0x1``, every thread of the CTA) from the start to
the end, sampled as "barrier" all the while. In the backward at d=128 that was 25 of the summary's 35 % "CTA
barrier" (benchmarks/results/NOTES.md, "Where the Gluon kernels' time goes"). This module reads the per-instruction
samples and reports the working warps' stalls without them.

On the GPU machine (one launch of the kernel under ncu, then its source page as CSV)::

    ncu --clock-control none -k regex:attn_bwd_sm90 -c 1 --section SourceCounters -o rep \\
        python3 benchmarks/gluon_validate.py --ncu-bwd fp16,128,0,8192 --out /tmp/x.json
    ncu -i rep.ncu-rep --page source --csv --print-source sass > src.csv

then anywhere: ``python -m benchmarks.gluon_bench.stalls src.csv [--top 6]``.

Without source pages, a whole launch's stall reasons compare kernels side by side (ours, cuDNN's, FA4's: each
reason's stall cycles per issued instruction, times the instructions). Idle warps there are set apart by count:
``--idle attn_bwd_sm90=3`` takes 3 warps per SM for the whole launch off the kernel's "barrier" figure. On the GPU
machine (``benchmarks/gluon_bwd_ncu_run.sh`` asks for these metrics with its others)::

    M='regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio$,smsp__inst_executed.sum'
    M="$M,smsp__cycles_active.avg,gpu__time_duration.sum"
    ncu --clock-control none --profile-from-start off --csv --page raw --metrics "$M" \\
        python3 benchmarks/gluon_validate.py --ncu-bwd ROW --out /tmp/x.json > raw.csv

then ``python -m benchmarks.gluon_bench.stalls --raw raw.csv --idle attn_bwd_sm90=3``.
"""
from __future__ import annotations

import argparse
import csv
import re
from collections import Counter

SAMPLES = "Warp Stall Sampling (All Samples)"
#: the kernel's closing barrier: every thread of the CTA, barrier 1, no thread count
_CLOSING_BARRIER = re.compile(r"^BAR\.SYNC(\.DEFER_BLOCKING)?\s+0x1\s*;?$")


def load(path: str) -> list[dict]:
    """The instructions of one launch's source page: [{"sass", "samples", "reasons": {reason: samples}}, ...] in
    address order. Raises ValueError when the file is not such a page (no sample column)."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    head = next((i for i, r in enumerate(rows) if SAMPLES in r), None)
    if head is None:
        raise ValueError(f"{path}: no '{SAMPLES}' column; write it with ncu -i REPORT --page source --csv "
                         "--print-source sass (the report needs --section SourceCounters)")
    names = rows[head]
    src, total = names.index("Source"), names.index(SAMPLES)
    reasons = [(i, n) for i, n in enumerate(names) if n.startswith("stall_") and "Not Issued" not in n]
    out = []
    for r in rows[head + 1:]:
        if len(r) != len(names) or not r[total].strip().isdigit():
            continue
        out.append({"sass": r[src].strip(), "samples": int(r[total]),
                    "reasons": {n[len("stall_"):]: int(r[i]) for i, n in reasons if r[i].strip().isdigit()}})
    return out


def _opcode(sass: str) -> str:
    """The instruction without its predicate (``@!P0 BRA x`` -> ``BRA x``)."""
    return sass.split(None, 1)[1] if sass.startswith("@") and " " in sass else sass


def idle(instructions: list[dict]) -> list[bool]:
    """Per instruction: whether its samples are warps parked at the closing barrier, i.e. it follows (directly, or
    after more of the same barrier) a ``BAR.SYNC 0x1``. Those warps issue nothing while they wait."""
    flags, after_barrier = [], False
    for ins in instructions:
        flags.append(after_barrier)
        op = _opcode(ins["sass"])
        after_barrier = bool(_CLOSING_BARRIER.match(op)) or (after_barrier and op.startswith("BAR.SYNC"))
    return flags


def summary(instructions: list[dict], top: int = 5) -> dict:
    """{"samples": all, "idle_share": share of them at the closing barrier, "reasons": [(reason, share of the
    working warps' samples), ...] largest first, "top": {reason: [(share, instruction, the two before it), ...]}}."""
    if not instructions:
        raise ValueError("no instructions: is this the source page of a launch with SourceCounters?")
    flags = idle(instructions)
    total = sum(i["samples"] for i in instructions)
    idle_samples = sum(i["samples"] for i, f in zip(instructions, flags) if f)
    work = [(k, i) for k, (i, f) in enumerate(zip(instructions, flags)) if not f]
    working = sum(i["samples"] for _, i in work) or 1
    by_reason = Counter()
    for _, i in work:
        by_reason.update(i["reasons"])
    tops = {}
    for reason, _ in by_reason.most_common(4):
        best = sorted(work, key=lambda ki: -ki[1]["reasons"].get(reason, 0))[:top]
        tops[reason] = [(i["reasons"].get(reason, 0) / working, i["sass"],
                         [instructions[j]["sass"] for j in range(max(0, k - 2), k)]) for k, i in best]
    return {"samples": total, "idle_share": idle_samples / total if total else 0.0,
            "reasons": [(r, n / working) for r, n in by_reason.most_common()], "top": tops}


def report(s: dict) -> str:
    """The summary as text: the idle share, the working warps' reasons, the top instructions of the first four."""
    lines = [f"{s['samples']:,} samples; {s['idle_share']:.1%} are idle warps at the closing barrier (set apart)",
             "working warps' samples by reason: "
             + ", ".join(f"{r} {share:.1%}" for r, share in s["reasons"][:8])]
    for reason, rows in s["top"].items():
        lines.append(f"{reason}:")
        lines += [f"  {share:6.1%}  {sass[:60]:<60}  after: {' ; '.join(p[:32] for p in prev)}"
                  for share, sass, prev in rows]
    return "\n".join(lines)


_RATIO = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")


def _number(text: str) -> float:
    return float(text.replace(",", "")) if text.strip() not in ("", "n/a") else 0.0


def raw_page(path: str) -> tuple[list, list, list]:
    """An ncu ``--csv --page raw`` file as (metric names, their units, one row per launch). Raises ValueError when
    it is not one (no 'Kernel Name' column)."""
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(line for line in f if line.startswith('"')) if r]
    if not rows or "Kernel Name" not in rows[0]:
        raise ValueError(f"{path}: not an ncu --csv --page raw file (no 'Kernel Name' column)")
    return rows[0], rows[1] if len(rows) > 1 else [], rows[2:]


def launch_stalls(path: str, idle: dict | None = None, min_ms: float = 0.0) -> list[dict]:
    """Per kernel launch of an ncu ``--csv --page raw`` file with the stall-ratio metrics:
    [{"kernel", "time_ms", "warp_instructions", "idle_warps", "gcycles": {reason: 1e9 warp-cycles}}, ...], reasons
    largest first, "selected" (issuing) left out. ``idle``: {kernel-name prefix: warps per SM parked for the whole
    launch}; their cycles (warps x SMs x active cycles) come off that kernel's "barrier". Launches shorter than
    ``min_ms`` are left out (a backward's pre- and post-passes)."""
    head, units, body = raw_page(path)
    reasons = {i: m.group(1) for i, n in enumerate(head) if (m := _RATIO.match(n)) and m.group(1) != "selected"}
    need = ["smsp__inst_executed.sum", "gpu__time_duration.sum"]
    if not reasons or any(n not in head for n in need):
        raise ValueError(f"{path}: needs the metrics smsp__average_warps_issue_stalled_*_per_issue_active.ratio, "
                         f"{', '.join(need)} (the module docstring's ncu command)")
    col = {n: head.index(n) for n in need + ["Kernel Name", "smsp__cycles_active.avg",
                                             "device__attribute_multiprocessor_count"] if n in head}
    time_unit = units[col["gpu__time_duration.sum"]] if units else ""
    if time_unit not in ("ns", "nsecond"):
        raise ValueError(f"{path}: gpu__time_duration.sum is in {time_unit!r}, not ns: run ncu with "
                         "--print-units base")
    out = []
    for r in body:
        name = r[col["Kernel Name"]]
        ns = _number(r[col["gpu__time_duration.sum"]])
        if ns / 1e6 < min_ms:
            continue
        inst = _number(r[col["smsp__inst_executed.sum"]])
        g = {reason: _number(r[i]) * inst / 1e9 for i, reason in reasons.items()}
        warps = next((w for prefix, w in (idle or {}).items() if name.startswith(prefix)), 0)
        if warps:
            if "smsp__cycles_active.avg" not in col or "device__attribute_multiprocessor_count" not in col:
                raise ValueError(f"{path}: --idle needs smsp__cycles_active.avg and the raw page's SM count")
            parked = warps * _number(r[col["device__attribute_multiprocessor_count"]]) \
                * _number(r[col["smsp__cycles_active.avg"]]) / 1e9
            g["barrier"] = max(0.0, g.get("barrier", 0.0) - parked)
        out.append({"kernel": name, "time_ms": ns / 1e6, "warp_instructions": int(inst), "idle_warps": warps,
                    "gcycles": dict(sorted(g.items(), key=lambda kv: -kv[1]))})
    return out


def launch_report(launches: list[dict], top: int = 8) -> str:
    """Launches side by side: one line per reason (the largest ``top`` over all of them), 1e9 warp-cycles."""
    if not launches:
        return "no launches"
    total = Counter()
    for launch in launches:
        total.update(launch["gcycles"])
    names = [f"{launch['kernel'][:24]} ({launch['time_ms']:.2f} ms"
             + (f", {launch['idle_warps']} idle warps off" if launch["idle_warps"] else "") + ")"
             for launch in launches]
    lines = ["stall reason, 1e9 warp-cycles | " + " | ".join(names)]
    lines += [f"{reason:<30} | " + " | ".join(f"{launch['gcycles'].get(reason, 0.0):.2f}" for launch in launches)
              for reason, _ in total.most_common(top)]
    return "\n".join(lines)


def _idle_arg(text: str) -> tuple:
    prefix, _, warps = text.partition("=")
    if not prefix or not warps.isdigit():
        raise argparse.ArgumentTypeError(f"--idle {text!r}: write KERNEL_PREFIX=WARPS, e.g. attn_bwd_sm90=3")
    return prefix, int(warps)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", help="ncu -i REPORT --page source --csv --print-source sass (one launch); with --raw, "
                    "ncu --csv --page raw with the stall-ratio metrics (any number of launches)")
    ap.add_argument("--top", type=int, help="instructions shown per reason (5); with --raw, reasons shown (8)")
    ap.add_argument("--raw", action="store_true", help="whole launches side by side from a raw page")
    ap.add_argument("--idle", type=_idle_arg, action="append", default=[],
                    help="with --raw: KERNEL_PREFIX=WARPS parked per SM for the whole launch (ours: attn_bwd_sm90=3)")
    ap.add_argument("--min-ms", type=float, default=0.5, help="with --raw: leave out shorter launches")
    args = ap.parse_args(argv)
    if args.raw:
        print(launch_report(launch_stalls(args.csv, dict(args.idle), args.min_ms), args.top or 8))
    else:
        print(report(summary(load(args.csv), args.top or 5)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
