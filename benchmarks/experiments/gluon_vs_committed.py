"""Print, per timed row of a gluon_validate.py table run with --fwd-override or --fwd-beside, the forward under
test against the configuration it replaced, timed beside it in the same rounds (``gluon_fwd_vs_committed``: the
median over rounds of committed time / tested time, with the rounds' min-max, or for a ``--timing calls`` run the
median's interval over the calls), and both against cuDNN.

    python benchmarks/experiments/gluon_vs_committed.py TABLE_JSON
"""
from __future__ import annotations

import json
import statistics
import sys


def main(path: str) -> None:
    data = json.load(open(path))
    rows = [r for r in data["rows"] if "gluon_fwd_vs_committed" in r]
    # the range beside each ratio, as gluon_table_md.py labels it: min-max over rounds, or the median's interval
    spread = "calls' interval" if data.get("timing") == "calls" else "min-max"
    print(f"dtype     d causal     N | tested/committed ({spread}) | committed/cuDNN tested/cuDNN")
    for r in rows:
        committed_vs_cudnn = r["cudnn_fwd_ms"] / r["gluon_committed_fwd_ms"]
        print(f"{r['dtype'].replace('torch.', ''):9s} {r['d']:3d} {str(r['causal']):6s} {r['N']:5d} | "
              f"{r['gluon_fwd_vs_committed']:.3f} ({r['gluon_fwd_vs_committed_min']:.2f}-"
              f"{r['gluon_fwd_vs_committed_max']:.2f})        | {committed_vs_cudnn:.2f}            "
              f"{r['gluon_fwd_vs_cudnn']:.2f}")
    if rows:
        ratios = [r["gluon_fwd_vs_committed"] for r in rows]
        print(f"{len(rows)} rows: median {statistics.median(ratios):.3f}, faster in "
              f"{sum(x > 1 for x in ratios)}, wins beyond the rounds' spread "
              f"{sum(r['gluon_fwd_vs_committed_min'] > 1 for r in rows)}, losses beyond it "
              f"{sum(r['gluon_fwd_vs_committed_max'] < 1 for r in rows)}")


if __name__ == "__main__":
    main(sys.argv[1])
