"""Markdown tables of a ``gluon_validate.py --bwd`` run: forward and backward TFLOP/s against cuDNN and SDPA-flash per
row, each row's target (forward >= 1.0x cuDNN, backward >= 0.9x cuDNN) and by how much it misses. Where the run
timed the Triton kernels, their ratio too; where it timed the committed backward configurations beside the chosen
ones (``--bwd-override``), the committed configurations' ratio to cuDNN (the whole flash_backward path, as Gluon's).
Where the run timed in interleaved rounds (``--rounds``), the ratio is the median of the per-round ratios and the
table gives their min-max over the rounds; where it timed a replaced forward configuration beside an adopted one
(``--fwd-adopted``), that one's per-round ratio too. A run timed call by call (``--timing calls``) has one "round" per
iteration, and the range is the median's 94 % interval over the iterations, not their min-max (the headers say so).

    python benchmarks/experiments/gluon_table_md.py benchmarks/results/gluon_h200_2026-12-02_4.json
"""
from __future__ import annotations

import json
import sys


def _f(x, fmt="{:.0f}"):
    return fmt.format(x) if isinstance(x, (int, float)) else "-"


def _verdict(g, target):
    if not isinstance(g, (int, float)):
        return "-"
    return "met" if g >= target else f"MISS by {100 * (1 - g / target):.0f}% (needs {target / g:.2f}x)"


def _span(xs):
    return f"{min(xs):.2f}-{max(xs):.2f}" if xs else "-"


def main(argv=None):
    data = json.load(open((argv or sys.argv[1:])[0]))
    rows = data["rows"]
    # the range beside each ratio: min-max over rounds, or over many calls the median's interval (timing.round_ratio)
    rng = "calls' median interval" if data.get("timing") == "calls" else "rounds min-max"
    every_word = "at both ends of the interval" if data.get("timing") == "calls" else "in every round"
    for kind, key, target in (("forward", "_fwd", 1.0), ("backward", "", 0.9)):
        print(f"\n### {kind} (TFLOP/s; ratio = the other kernel's time / Gluon's)\n")
        triton = any(f"gluon{key}_vs_triton" in r for r in rows)
        committed = kind == "backward" and any("gluon_committed_full_ms" in r for r in rows)
        pingpong = kind == "forward" and any("gluon_no_pingpong_fwd_ms" in r for r in rows)
        spread = any(f"gluon{key}_vs_cudnn_min" in r for r in rows)
        replaced = kind == "forward" and any("gluon_fwd_vs_committed" in r for r in rows)
        head = "| dtype | d | causal | N | cuDNN | SDPA-flash |" + (" Triton |" if triton else "") + " Gluon |"
        head += " Gluon/cuDNN |" + (f" {rng} |" if spread else "")
        head += " Gluon/flash |" + (" Gluon/Triton |" if triton else "")
        head += " ping-pong off: Gluon ms on / off |" if pingpong else ""
        head += " committed configurations: Gluon/cuDNN |" if committed else ""
        head += f" adopted / replaced configuration ({rng}) |" if replaced else ""
        head += f" correct | target >= {target}x cuDNN |"
        print(head)
        print("|" + "---|" * (head.count("|") - 1))
        ratios, met, ratios_c, met_c, tr, every, none = [], 0, [], 0, [], 0, 0
        for r in rows:
            g = r.get(f"gluon{key}_vs_cudnn")
            if isinstance(g, (int, float)):
                ratios.append(g)
                met += g >= target
            line = (f"| {r['dtype']} | {r['d']} | {r['causal']} | {r['N']} | {_f(r.get(f'cudnn{key}_tflops'))} | "
                    f"{_f(r.get(f'flash{key}_tflops'))} |")
            line += f" {_f(r.get(f'triton{key}_tflops'))} |" if triton else ""
            line += f" {_f(r.get(f'gluon{key}_tflops'))} | {_f(g, '{:.2f}')} |"
            if spread:
                lo, hi = r.get(f"gluon{key}_vs_cudnn_min"), r.get(f"gluon{key}_vs_cudnn_max")
                line += f" {_f(lo, '{:.2f}')}-{_f(hi, '{:.2f}')} |"
                if isinstance(lo, (int, float)):
                    every += lo >= target
                    none += hi < target
            line += f" {_f(r.get(f'gluon{key}_vs_flash'), '{:.2f}')} |"
            if triton:
                t = r.get(f"gluon{key}_vs_triton")
                line += f" {_f(t, '{:.2f}')} |"
                if isinstance(t, (int, float)):
                    tr.append(t)
            if pingpong:
                line += f" {_f(r.get('gluon_fwd_ms'), '{:.3f}')} / {_f(r.get('gluon_no_pingpong_fwd_ms'), '{:.3f}')} |"
            if committed:
                c = r.get("gluon_committed_full_vs_cudnn")
                if isinstance(c, (int, float)):
                    ratios_c.append(c)
                    met_c += c >= target
                line += f" {_f(c, '{:.2f}')} |"
            if replaced:
                c = r.get("gluon_fwd_vs_committed")
                line += (f" {_f(c, '{:.2f}')} ({_f(r.get('gluon_fwd_vs_committed_min'), '{:.2f}')}-"
                         f"{_f(r.get('gluon_fwd_vs_committed_max'), '{:.2f}')}) |" if c is not None else " - |")
            ok = r.get("fwd_correct" if key else "correct")
            line += f" {'yes' if ok else ok} | {_verdict(g, target) if 'error' not in r else r['error'][:80]} |"
            print(line)
        if ratios:
            print(f"\n{kind}: {met}/{len(ratios)} rows meet {target}x cuDNN; Gluon/cuDNN {_span(ratios)}"
                  + (f"; Gluon/Triton {_span(tr)} ({sum(x >= 1 for x in tr)}/{len(tr)} rows >= 1)" if tr else "")
                  + (f"; with the committed configurations: {met_c}/{len(ratios_c)} rows, {_span(ratios_c)}"
                     if ratios_c else "")
                  + (f"; met {every_word}: {every}, missed {every_word}: {none}" if spread else ""))


if __name__ == "__main__":
    main()
