"""Chapter 07 dashboards: the backward pass — store P or recompute it (bytes and FLOPs), Algorithm 4 stepped, and
a gradient check of the simulator and of the Triton kernels against the float64 reference gradients.

``BackwardCostDashboard().update(n=8192)`` changes the problem; ``rows`` holds the two :class:`flashsim.model.simulator.Traffic`
results. :func:`algorithm4_stepper` is chapter 05's :class:`~flashsim.widgets.FlashStepper` with ``backward=True``,
started at the first backward event.
"""
from __future__ import annotations

import numpy as np

from flashsim.model.units import format_bytes
from flashsim.course.ch05.dashboards import FlashStepper
from flashsim.course.ch07.figures import BackwardCostsPlot, backward_cost_rows
from flashsim.course.kit.dashboard import Dashboard, slider
from flashsim.course.kit.optional import missing
from flashsim.model.attention.reference import reference_attention_grads
from flashsim.model.simulator import simulate

__all__ = ["BackwardCostDashboard", "algorithm4_stepper", "gradient_check"]


class BackwardCostDashboard(Dashboard):
    """Standard attention's backward (reads the stored N×N P, writes and reads dP, dS) against FlashAttention's
    (recomputes S and P tile by tile from Q, K and the logsumexp), forward + backward, bytes and FLOPs.

    ``rows`` = {"standard: store P": Traffic, "flash2: recompute P": Traffic} (count mode, backward=True);
    ``update(n=..., d=...)`` recomputes them (the N and d sliders call it).

    Introduced in chapter 07.
    """

    NS = (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)
    DS = (32, 64, 128, 256)
    plot = BackwardCostsPlot
    figure_class = "flashsim-backward-costs-plot"

    def __init__(self, n: int = 4096, d: int = 64, dtype: str = "fp16", device: str = "h200"):
        self.n, self.d, self.dtype, self.device = int(n), int(d), dtype, device
        self.update()

    def controls(self):
        return {"n": slider("N", [(f"{n:,}", n) for n in self.NS]), "d": slider("d", self.DS)}

    def apply(self, n: int | None = None, d: int | None = None) -> dict:
        self.n = int(n or self.n)
        self.d = int(d or self.d)
        self.rows = backward_cost_rows(self.n, self.d, self.dtype, self.device)
        return self.rows

    def summary(self) -> dict:
        """Bytes and FLOPs ratios (standard / flash) of the backward part and of forward + backward."""
        std, fl = self.rows.values()
        return {"backward bytes ratio": std.backward_part["hbm_bytes"] / fl.backward_part["hbm_bytes"],
                "backward FLOPs ratio": std.backward_part["flops"] / fl.backward_part["flops"],
                "total bytes ratio": std.hbm_bytes / fl.hbm_bytes,
                "total FLOPs ratio": std.flops / fl.flops,
                "total time ratio": std.time_s / fl.time_s}

    def readout(self) -> str:
        s = self.summary()
        std, fl = self.rows.values()
        return (f"N={self.n}, d={self.d}, {self.dtype}: the backward moves {s['backward bytes ratio']:.1f}× more bytes "
                f"when P is stored ({format_bytes(std.backward_part['hbm_bytes'])} vs "
                f"{format_bytes(fl.backward_part['hbm_bytes'])}), while recomputation costs "
                f"{1 / s['backward FLOPs ratio']:.2f}× the FLOPs; roofline time fwd+bwd on {self.device}: "
                f"{std.time_s * 1e6:,.1f} µs vs {fl.time_s * 1e6:,.1f} µs")

    def plot_args(self) -> dict:
        return {"rows": self.rows, "title": f"forward + backward, N={self.n}, d={self.d}, {self.dtype}"}


def algorithm4_stepper(n: int = 16, d: int = 8, block_r: int = 4, block_c: int = 4, algo: str = "flash1"):
    """Chapter 05's FlashStepper over forward + backward (Algorithm 4 for flash1, FA2's form for flash2), moved to
    the first backward event (``stepper.first_backward_step``)."""
    s = FlashStepper(n=n, d=d, block_r=block_r, block_c=block_c, algo=algo, backward=True)
    s.update(s.first_backward_step)
    return s


def gradient_check(n: int = 64, d: int = 32, causal: bool = False, seed: int = 0, kernel: bool = True) -> dict:
    """Gradients of sum(O ∘ dO) from the simulator (flash2 backward, fp32 storage) and from the Triton kernels'
    autograd (``flashsim.kernels.attention``, fp32; the interpreter on a CPU) against the float64 reference
    gradients (:func:`flashsim.model.attention.reference.reference_attention_grads`).

    Returns {"rows": [(source, grad, max abs error, relative error)], "errors": {source: {grad: rel error}}};
    without torch and triton (a lab-only install) the simulator's rows only, having said so.

    Introduced in chapter 07.
    """
    rng = np.random.default_rng(seed)
    q, k, v, do = (rng.standard_normal((1, n, d), dtype=np.float32) for _ in range(4))   # (1, N, d) each
    ref = dict(zip(("dQ", "dK", "dV"), reference_attention_grads(q[0], k[0], v[0], do[0], causal=causal)))

    got = {}
    sim = simulate("flash2", n, d, dtype="fp32", causal=causal, backward=True, inputs=(q, k, v, do),
                   record_events=False)
    got["simulator (flash2, fp32)"] = dict(zip(("dQ", "dK", "dV"), (g[0] for g in sim.grads)))
    why = missing("kernels") if kernel else None
    if why:
        print(why + " The simulator's gradients are checked alone.")
    if kernel and not why:
        import torch                                           # lazy: torch and triton only where kernels run

        from flashsim.kernels import INTERPRETER, attention
        dev = "cpu" if INTERPRETER else "cuda"
        tq, tk, tv = (torch.tensor(x[None], device=dev, requires_grad=True) for x in (q, k, v))
        out = attention(tq, tk, tv, causal=causal)
        out.backward(torch.tensor(do[None], device=dev))
        label = f"Triton kernels ({'interpreter' if INTERPRETER else 'GPU'}, fp32)"
        got[label] = {name: t.grad[0, 0].detach().cpu().numpy() for name, t in zip(("dQ", "dK", "dV"), (tq, tk, tv))}
    rows, errors = [], {}
    for source, grads in got.items():
        errors[source] = {}
        for name, g in grads.items():
            err = float(np.abs(np.asarray(g, np.float64) - ref[name]).max())
            rel = err / float(np.abs(ref[name]).max())
            rows.append((source, name, err, rel))
            errors[source][name] = rel
    return {"rows": rows, "errors": errors}
