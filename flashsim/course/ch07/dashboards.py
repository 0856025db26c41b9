"""Chapter 07 dashboards: the backward pass — store P or recompute it (bytes and FLOPs), Algorithm 4 stepped, and
a gradient check of the simulator and of the Triton kernels against float64 autograd.

``BackwardCostDashboard().update(n=8192)`` changes the problem; ``rows`` holds the two :class:`flashsim.model.simulator.Traffic`
results. :func:`algorithm4_stepper` is chapter 05's :class:`~flashsim.widgets.FlashStepper` with ``backward=True``,
started at the first backward event.
"""
from __future__ import annotations

import numpy as np

from flashsim.course.ch00.dashboards import widget_or_figure

__all__ = ["BackwardCostDashboard", "algorithm4_stepper", "gradient_check"]


class BackwardCostDashboard:
    """Standard attention's backward (reads the stored N×N P, writes and reads dP, dS) against FlashAttention's
    (recomputes S and P tile by tile from Q, K and the logsumexp), forward + backward, bytes and FLOPs.

    ``rows`` = {"standard: store P": Traffic, "flash2: recompute P": Traffic} (count mode, backward=True).

    Introduced in chapter 07.
    """

    NS = (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)

    def __init__(self, n: int = 4096, d: int = 64, dtype: str = "fp16", device: str = "h200"):
        self.n, self.d, self.dtype, self.device = n, d, dtype, device
        self.update()

    def update(self, n: int | None = None, d: int | None = None) -> dict:
        from flashsim.model.simulator import traffic
        self.n = int(n or self.n)
        self.d = int(d or self.d)
        kw = dict(dtype=self.dtype, device=self.device, backward=True)
        self.rows = {"standard: store P": traffic("naive", self.n, self.d, **kw),
                     "flash2: recompute P": traffic("flash2", self.n, self.d, **kw)}
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
                f"when P is stored ({std.backward_part['hbm_bytes'] / 1e6:,.1f} MB vs "
                f"{fl.backward_part['hbm_bytes'] / 1e6:,.1f} MB), while recomputation costs "
                f"{1 / s['backward FLOPs ratio']:.2f}× the FLOPs; roofline time fwd+bwd on {self.device}: "
                f"{std.time_s * 1e6:,.1f} µs vs {fl.time_s * 1e6:,.1f} µs")

    def figure(self):
        from flashsim.course.ch07.figures import plot_backward_costs
        return plot_backward_costs(self.rows, title=f"forward + backward, N={self.n}, d={self.d}, {self.dtype}")

    @widget_or_figure
    def show(self):
        """Sliders for N and d; the readout and the picture update when they move."""
        import ipywidgets as W
        from flashsim.course.ch05.dashboards import png_image_widget, set_png
        n = W.SelectionSlider(options=list(self.NS), value=self.n, description="N", continuous_update=False)
        d = W.SelectionSlider(options=[32, 64, 128, 256], value=self.d, description="d", continuous_update=False)
        text = W.HTML(self.readout())
        img = png_image_widget(self.figure(), "flashsim-backward-costs-plot")

        def redraw(_):
            self.update(n=n.value, d=d.value)
            text.value = self.readout()
            set_png(img, self.figure())

        n.observe(redraw, names="value")
        d.observe(redraw, names="value")
        self._widgets = {"n": n, "d": d, "readout": text, "image": img}
        return W.VBox([W.HBox([n, d]), text, img])


def algorithm4_stepper(n: int = 16, d: int = 8, block_r: int = 4, block_c: int = 4, algo: str = "flash1"):
    """Chapter 05's FlashStepper over forward + backward (Algorithm 4 for flash1, FA2's form for flash2), moved to
    the first backward event (``stepper.first_backward_step``)."""
    from flashsim.course.ch05.dashboards import FlashStepper
    s = FlashStepper(n=n, d=d, block_r=block_r, block_c=block_c, algo=algo, backward=True)
    s.update(s.first_backward_step)
    return s


def gradient_check(n: int = 64, d: int = 32, causal: bool = False, seed: int = 0, kernel: bool = True) -> dict:
    """Gradients of sum(O ∘ dO) from the simulator (flash2 backward, fp32 storage) and from the Triton kernels'
    autograd (``flashsim.kernels.attention``, fp32; the interpreter on a CPU) against torch autograd in float64.

    Returns {"rows": [(source, grad, max abs error, relative error)], "errors": {source: {grad: rel error}}}.

    Introduced in chapter 07.
    """
    import torch

    from flashsim.model.simulator import simulate

    rng = np.random.default_rng(seed)
    q, k, v, do = (rng.standard_normal((1, n, d), dtype=np.float32) for _ in range(4))
    t64 = [torch.tensor(x[0], dtype=torch.float64, requires_grad=True) for x in (q, k, v)]
    s = t64[0] @ t64[1].T / d ** 0.5
    if causal:
        s = s.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
    o = torch.softmax(s, dim=-1) @ t64[2]
    o.backward(torch.tensor(do[0], dtype=torch.float64))
    ref = {name: t.grad.numpy() for name, t in zip(("dQ", "dK", "dV"), t64)}

    got = {}
    sim = simulate("flash2", n, d, dtype="fp32", causal=causal, backward=True, inputs=(q, k, v, do),
                   record_events=False)
    got["simulator (flash2, fp32)"] = dict(zip(("dQ", "dK", "dV"), (g[0] for g in sim.grads)))
    if kernel:
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
