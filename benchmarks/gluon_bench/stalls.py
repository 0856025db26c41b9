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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv", help="ncu -i REPORT --page source --csv --print-source sass (one launch)")
    ap.add_argument("--top", type=int, default=5, help="instructions shown per reason")
    args = ap.parse_args(argv)
    print(report(summary(load(args.csv), args.top)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
