"""Chapter 12 dashboard: the learner's kernel under block-size sliders, measured IO against the kernel view.

:class:`KernelBlockDashboard` keeps its state in plain methods (``update(block_m=..., block_n=..., causal=...)``,
``current``), so tests drive it without Jupyter; ``show()`` wraps the same methods in ipywidgets (imported
lazily). In the interpreter each move runs the learner's kernel at a small N and counts its loads and stores; on a
GPU it times the kernel (``do_bench`` median) at a full size instead.
"""
from __future__ import annotations

from .ch00 import widget_or_figure

__all__ = ["KernelBlockDashboard", "template_source", "learner_or_solution"]

BLOCKS = (16, 32, 64, 128)


def template_source() -> str:
    """The Triton source of the chapter-12 template kernel (:mod:`flashsim.kernels_exercise`), to read."""
    import inspect

    from ..kernels_exercise import _flash_template_kernel
    return inspect.getsource(getattr(_flash_template_kernel, "fn", _flash_template_kernel))


def learner_or_solution(inner, verdict):
    """The learner's inner-loop function if its verdict passed, else the solution (so later cells still run)."""
    if verdict:
        print("using your kernel")
        return inner
    from ..solutions.ch12 import flash_inner
    print("your kernel did not pass yet: the cells below use the solution (flashsim.solutions.ch12.flash_inner)")
    return flash_inner


def _nonzero(io: dict) -> dict:
    return {kind: {t: b for t, b in io[kind].items() if b} for kind in ("loads", "stores")}


class KernelBlockDashboard:
    """BLOCK_M / BLOCK_N / causal sliders over the learner's kernel (chapter 12).

    ``current`` = {"block_m", "block_n", "causal", "simulated": {"loads", "stores"}, "measured": ... or None,
    "time_ms": ... or None, "exact": bool or None}.
    """

    def __init__(self, inner, n: int | None = None, d: int | None = None, block_m: int = 32, block_n: int = 32,
                 causal: bool = False):
        from ..course import pick
        from ..kernels import INTERPRETER
        self.inner = inner
        self.interpreter = bool(INTERPRETER)
        self.n = int(n or (96 if self.interpreter else pick(small=1024, full=4096)))
        self.d = int(d or (32 if self.interpreter else 64))
        self.dtype = "fp32" if self.interpreter else "fp16"
        self._cache: dict = {}
        self.current: dict = {}
        self.update(block_m=block_m, block_n=block_n, causal=causal)

    def measure(self, block_m: int, block_n: int, causal: bool) -> dict:
        key = (int(block_m), int(block_n), bool(causal))
        if key in self._cache:
            return self._cache[key]
        from ..exercises.ch12 import _inputs, _one_launch, run_learner_kernel
        from ..kernel_io import kernel_io
        sim = _one_launch(kernel_io("flash_fwd", self.n, self.d, block_m, block_n, causal=causal,
                                    dtype=self.dtype).per_tensor())
        q, k, v = _inputs(1, 1, self.n, self.d, self.dtype, "cpu" if self.interpreter else "cuda", seed=3)
        out = {"block_m": key[0], "block_n": key[1], "causal": key[2], "simulated": sim, "measured": None,
               "time_ms": None, "exact": None}
        if self.interpreter:
            from ..measure import count_io
            counted = count_io(run_learner_kernel, self.inner, q, k, v, causal, block_m, block_n)
            out["measured"] = _one_launch(counted.per_tensor())
            out["exact"] = _nonzero(out["measured"]) == _nonzero(sim)
        else:
            from ..measure import bench
            out["time_ms"] = bench(lambda: run_learner_kernel(self.inner, q, k, v, causal, block_m, block_n))
        self._cache[key] = out
        return out

    def update(self, block_m: int | None = None, block_n: int | None = None, causal: bool | None = None) -> dict:
        bm = int(block_m if block_m is not None else self.current.get("block_m", 32))
        bn = int(block_n if block_n is not None else self.current.get("block_n", 32))
        c = bool(causal if causal is not None else self.current.get("causal", False))
        for name, value in (("block_m", bm), ("block_n", bn)):
            if value not in BLOCKS:
                raise ValueError(f"{name}={value}: the dashboard offers {list(BLOCKS)}")
        self.current = self.measure(bm, bn, c)
        return self.current

    def readout(self) -> str:
        c = self.current
        sim = sum(c["simulated"]["loads"].values()) + sum(c["simulated"]["stores"].values())
        text = (f"N={self.n}, d={self.d}, BLOCK_M={c['block_m']}, BLOCK_N={c['block_n']}, causal={c['causal']}: "
                f"simulated {sim:,} B")
        if c["measured"] is not None:
            meas = sum(c["measured"]["loads"].values()) + sum(c["measured"]["stores"].values())
            text += f", measured {meas:,} B ({'equal' if c['exact'] else 'DIFFERENT'})"
        if c["time_ms"] is not None:
            text += f", {c['time_ms']:.3f} ms on the GPU"
        return text

    def figure(self):
        from ..plots.ch12 import plot_kernel_io_by_tensor
        return plot_kernel_io_by_tensor(self.current["simulated"], self.current["measured"], title=self.readout())

    @widget_or_figure
    def show(self):
        import ipywidgets as W

        from .ch05 import png_image_widget, set_png
        bm = W.SelectionSlider(options=list(BLOCKS), value=self.current["block_m"], description="BLOCK_M",
                               continuous_update=False)
        bn = W.SelectionSlider(options=list(BLOCKS), value=self.current["block_n"], description="BLOCK_N",
                               continuous_update=False)
        causal = W.Checkbox(value=self.current["causal"], description="causal")
        img = png_image_widget(self.figure())

        def redraw(_=None):
            self.update(block_m=bm.value, block_n=bn.value, causal=causal.value)
            set_png(img, self.figure())

        for w in (bm, bn, causal):
            w.observe(redraw, names="value")
        return W.VBox([W.HBox([bm, bn, causal]), img])
