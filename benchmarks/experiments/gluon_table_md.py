"""Markdown tables of a ``gluon_validate.py --bwd`` run: forward and backward TFLOP/s against cuDNN and SDPA-flash per
row, each row's target (forward >= 1.0x cuDNN, backward >= 0.9x cuDNN) and by how much it misses.

    python benchmarks/experiments/gluon_table_md.py benchmarks/results/gluon_h200_2026-12-02_3.json
"""
from __future__ import annotations

import json
import sys


def _f(x, fmt="{:.0f}"):
    return fmt.format(x) if isinstance(x, (int, float)) else "-"


def main(argv=None):
    data = json.load(open((argv or sys.argv[1:])[0]))
    rows = data["rows"]
    for kind, key, target in (("forward", "_fwd", 1.0), ("backward", "", 0.9)):
        print(f"\n### {kind} (TFLOP/s; ratio = cuDNN's time / Gluon's)\n")
        extra = kind == "backward" and any("gluon_committed_ms" in r for r in rows)
        head = "| dtype | d | causal | N | cuDNN | SDPA-flash | Gluon | Gluon/cuDNN | Gluon/flash | correct |"
        head += " Gluon kernel, L/delta in smem / as committed (ms) |" if extra else ""
        print(head + f" target >= {target}x cuDNN |")
        print("|" + "---|" * (head.count("|") - 1 + 1))
        ratios, met = [], 0
        for r in rows:
            g = r.get(f"gluon{key}_vs_cudnn")
            ok = r.get("fwd_correct" if key else "correct")
            if isinstance(g, (int, float)):
                ratios.append(g)
                met += g >= target
                verdict = "met" if g >= target else f"MISS by {100 * (1 - g / target):.0f}% (needs {target / g:.2f}x)"
            else:
                verdict = r.get("error", "-")
            line = (f"| {r['dtype']} | {r['d']} | {r['causal']} | {r['N']} | {_f(r.get(f'cudnn{key}_tflops'))} | "
                    f"{_f(r.get(f'flash{key}_tflops'))} | {_f(r.get(f'gluon{key}_tflops'))} | {_f(g, '{:.2f}')} | "
                    f"{_f(r.get(f'gluon{key}_vs_flash'), '{:.2f}')} | {'yes' if ok else ok} |")
            if extra:
                line += f" {_f(r.get('gluon_chosen_ms'), '{:.3f}')} / {_f(r.get('gluon_committed_ms'), '{:.3f}')} |"
            print(line + f" {verdict} |")
        if ratios:
            print(f"\n{kind}: {met}/{len(ratios)} rows meet {target}x cuDNN; Gluon/cuDNN {min(ratios):.2f}-"
                  f"{max(ratios):.2f}")


if __name__ == "__main__":
    main()
