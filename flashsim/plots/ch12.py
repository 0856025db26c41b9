"""Chapter 12 figures: the learner's kernel, its measured IO against the simulator's, and its speed against SDPA.

Every function returns a matplotlib Figure (Agg-safe: no pyplot).
"""
from __future__ import annotations

from ._common import new_figure

__all__ = ["plot_kernel_io_by_tensor", "plot_speed_vs_sdpa"]


def plot_kernel_io_by_tensor(simulated: dict, measured: dict | None = None, title: str = ""):
    """Bars per tensor (Q, K, V loaded; O, LSE stored): simulated bytes, and measured bytes where given.

    simulated / measured: {"loads": {tensor: bytes}, "stores": {tensor: bytes}} (one launch).
    """
    fig = new_figure((6.4, 3.2))
    ax = fig.add_subplot()
    names = [("load", t) for t in sorted(simulated["loads"])] + [("store", t) for t in sorted(simulated["stores"])]
    xs = list(range(len(names)))
    sim = [simulated["loads" if k == "load" else "stores"][t] / 1e3 for k, t in names]
    w = 0.38 if measured else 0.6
    ax.bar([x - (w / 2 if measured else 0) for x in xs], sim, w, label="simulated (kernel_io)", color="#1f77b4")
    if measured:
        meas = [measured["loads" if k == "load" else "stores"].get(t, 0) / 1e3 for k, t in names]
        ax.bar([x + w / 2 for x in xs], meas, w, label="measured (count_io)", color="#d62728")
    ax.set_xticks(xs, [f"{t}\n{k}" for k, t in names])
    ax.set_ylabel("kB")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_speed_vs_sdpa(speed: dict | None):
    """Median ms and TFLOP/s of the learner's kernel, flashsim.kernels.flash_forward and torch SDPA (a GPU run of
    :func:`flashsim.exercises.sdpa_speed`); without a GPU (speed None) a panel that says so."""
    fig = new_figure((6.4, 3.0))
    if not speed:
        ax = fig.add_subplot()
        ax.axis("off")
        ax.text(0.5, 0.5, "no CUDA GPU: speed against SDPA is measured on a GPU only\n"
                "(the interpreter's wall time says nothing about a GPU)", ha="center", va="center", fontsize=10)
        return fig
    labels = ["yours", "flashsim\nflash_forward", "torch SDPA"]
    ms = [speed["learner_ms"], speed["flashsim_ms"], speed["sdpa_ms"]]
    tf = [speed["tflops"]["learner"], speed["tflops"]["flashsim"], speed["tflops"]["sdpa"]]
    colors = ["#d62728", "#1f77b4", "#7f7f7f"]
    ax1, ax2 = fig.subplots(1, 2)
    ax1.bar(labels, ms, color=colors)
    ax1.set_ylabel("median ms (do_bench)")
    ax2.bar(labels, tf, color=colors)
    ax2.set_ylabel("TFLOP/s (4·B·H·N²·d / t)")
    s = speed["size"]
    fig.suptitle(f"{speed.get('device', 'GPU')}: B={s['batch']}, H={s['heads']}, N={s['n']}, d={s['d']}, "
                 f"{s['dtype']}{', causal' if s['causal'] else ''}", fontsize=9)
    for ax in (ax1, ax2):
        ax.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    return fig
