"""Chapter 14's three-kernel comparison: the course's fastest kernel, cuDNN and FlashAttention-4, from one recorded
run that timed all three in the same interleaved rounds (``attention_speed_fa4``: ``benchmarks/attention_speed.py``
with FA4's column).

- :func:`fa4_comparison`: the run's rows as TFLOP/s of the three kernels, with the per-round range of the course's
  speed over FA4's, labelled with the run's own GPU and date;
- :func:`fa4_summary_text`: the sentence the chapter prints under the figure, written from the numbers;
- :func:`plot_fa4_comparison`: one figure, forward and backward side by side.
"""
from __future__ import annotations

from flashsim.course.kit.plotting import new_figure
from flashsim.course.kit.results import load_result, provenance_label

__all__ = ["fa4_comparison", "fa4_summary_text", "plot_fa4_comparison"]

#: the three kernels of the figure: the run's key -> the label a learner reads
FA4_KERNELS = {"ours": "course (fastest)", "cudnn": "cuDNN (SDPA)", "fa4": "FlashAttention-4"}
_COLORS = {"ours": "#d62728", "cudnn": "#7f7f7f", "fa4": "#1f77b4"}


def fa4_comparison(run: dict | None = None) -> dict:
    """{"label": "<GPU>, <date>", "rounds", "rows": [{"mode", "dtype", "d", "causal", "n", "tflops": {kernel: TFLOP/s}
    for the three kernels, "ours_is" (which course kernel was fastest), "ours_over_fa4": (median, lo, hi) speed ratio
    over the rounds, "fa4_over_cudnn" (median over the rounds), "correct": every kernel within 2x torch's error of float64}]}; rows without FA4 are left out,
    {} when the run has none."""
    run = load_result("attention_speed_fa4") if run is None else run
    rows = []
    for r in run.get("rows", []):
        tf = r.get("tflops", {})
        if not all(k in tf for k in FA4_KERNELS):
            continue
        lo, hi = r.get("ratio_range", {}).get("fa4", [None, None])
        check = r.get("check", {})
        rows.append({"mode": r["mode"], "dtype": r["dtype"], "d": r["d"], "causal": r["causal"], "n": r["n"],
                     "tflops": {k: tf[k] for k in FA4_KERNELS}, "ours_is": r.get("ours_is", "ours"),
                     "ours_over_fa4": (r["ratio"]["fa4"], lo, hi),
                     "fa4_over_cudnn": r.get("fa4_vs_cudnn") or tf["fa4"] / tf["cudnn"],
                     "correct": bool(check.get("pass")) and bool(check.get("fa4", {}).get("ok"))})
    if not rows:
        return {}
    return {"label": provenance_label(run), "rounds": run.get("rounds"), "rows": rows}


def fa4_summary_text(cmp: dict | None = None) -> str:
    """One paragraph of what the recorded run shows, per direction: the course's speed over FA4's and FA4's over
    cuDNN's (lowest to highest row), and how many rows were correct."""
    cmp = fa4_comparison() if cmp is None else cmp
    if not cmp:
        return "No recorded run with FlashAttention-4."
    parts = []
    for mode, name in (("fwd", "forward"), ("bwd", "backward")):
        rows = [r for r in cmp["rows"] if r["mode"] == mode]
        if not rows:
            continue
        ours = [r["ours_over_fa4"][0] for r in rows]
        fa4 = [r["fa4_over_cudnn"] for r in rows]
        parts.append(f"{name}: the course's kernel runs at {min(ours):.2f}–{max(ours):.2f}× FlashAttention-4's "
                     f"speed, and FlashAttention-4 at {min(fa4):.2f}–{max(fa4):.2f}× cuDNN's ({len(rows)} rows)")
    good = sum(r["correct"] for r in cmp["rows"])
    return (f"Measured on {cmp['label']}, median of {cmp['rounds']} interleaved rounds: " + "; ".join(parts)
            + f". All three were checked against float64 first: {good}/{len(cmp['rows'])} rows correct.")


def _row_label(r: dict) -> str:
    return f"{'bf16' if r['dtype'] == 'bfloat16' else 'fp16'} d={r['d']}{' causal' if r['causal'] else ''}"


def plot_fa4_comparison(cmp: dict | None = None):
    """TFLOP/s of the course's fastest kernel, cuDNN and FlashAttention-4, one group of bars per row, forward and
    backward side by side; titled with the GPU and date of the run."""
    cmp = fa4_comparison() if cmp is None else cmp
    modes = [m for m in ("fwd", "bwd") if any(r["mode"] == m for r in cmp.get("rows", []))]
    fig = new_figure(figsize=(9.6, 3.6))
    if not modes:
        fig.text(0.5, 0.5, "no recorded run with FlashAttention-4", ha="center")
        return fig
    axes = fig.subplots(1, len(modes), sharey=True, squeeze=False)[0]
    width = 0.8 / len(FA4_KERNELS)
    for ax, mode in zip(axes, modes):
        rows = [r for r in cmp["rows"] if r["mode"] == mode]
        for i, (key, label) in enumerate(FA4_KERNELS.items()):
            xs = [j + (i - 1) * width for j in range(len(rows))]
            ax.bar(xs, [r["tflops"][key] for r in rows], width, color=_COLORS[key], label=label)
        ax.set_xticks(range(len(rows)), [_row_label(r) for r in rows], rotation=45, ha="right", fontsize=7)
        ax.set_title("forward" if mode == "fwd" else "backward", fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("TFLOP/s", fontsize=8)
    n = sorted({r["n"] for r in cmp["rows"]})
    fig.suptitle(f"N = {', '.join(f'{x:,}' for x in n)}: measured on {cmp['label']}", fontsize=9, x=0.02,
                 ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    fig.legend(*axes[0].get_legend_handles_labels(), fontsize=7, loc="upper right", ncol=3, frameon=False)
    return fig
