"""Chapter 11 dashboards: four pitfalls, each a plain class with ``update(...)`` and ``current`` (testable without
Jupyter) and a ``show()`` that wraps it in ipywidgets (imported lazily).

* :class:`ShortSequenceDashboard`: where the win shrinks: the predicted speedup of flash2 over naive against N, for
  the attention core and for the whole layer (:func:`short_sequence_times`).
* :class:`MismatchExplorer`: "flash changed my outputs": a mask or dtype mismatch between the kernel and the
  reference, and the per-row error pattern that tells them apart (:func:`mismatch_errors`).
* :class:`RescaleDriftDashboard`: the bookkeeping bug (``rescale=False`` in
  :func:`flashsim.model.attention.online_softmax.online_attention_row`) and the drift it causes (:func:`rescale_drift`).
* Not sub-quadratic: :func:`flops_sweep` (FLOPs of naive and flash against N), plotted by
  :func:`flashsim.plots.plot_flops_vs_n`.
"""
from __future__ import annotations

import math

import numpy as np

from flashsim.course.ch00.dashboards import widget_or_figure

__all__ = ["short_sequence_times", "speedup_sweep", "ShortSequenceDashboard", "mismatch_errors", "MismatchExplorer",
           "rescale_drift", "RescaleDriftDashboard", "flops_sweep", "SHORT_NS"]

#: sequence lengths of the short-sequence sweep
SHORT_NS = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)


# --- 1. short sequences -----------------------------------------------------------------------------------------
def short_sequence_times(n: int, d: int = 64, heads: int = 16, device: str = "h200") -> dict:
    """Predicted forward times of one transformer layer's attention core, naive vs flash2, and of the layer (ch. 11).

    * **attention core**: ``flashsim.traffic(..., l2=True).time_s``, the roofline time on the DRAM bytes that get
      past L2 (chapter 09), for naive (Algorithm 0) and flash2, `heads` heads of size `d`, batch 1;
    * **the rest of the layer**: the Q, K, V and output projections and the MLP (4× expansion) on
      d_model = heads·d: 24·N·d_model² matmul FLOPs, reading 12·d_model² fp16 weights and ~10·N·d_model
      activations, through the same roofline (:func:`flashsim.model.roofline.roofline`).

    Two effects shrink the win at short N: the core's byte ratio naive/flash is about 1 + N/d when one K/V pass
    suffices, and the core is a small part of the layer (Amdahl). Returns both Traffic, the times in seconds, the
    core speedup and the layer speedup.
    """
    from flashsim.model.simulator import traffic
    from flashsim.model.roofline import roofline
    naive = traffic("naive", n, d, heads=heads, device=device, l2=True)
    flash = traffic("flash2", n, d, heads=heads, device=device, l2=True)
    d_model = heads * d
    other = roofline(24 * n * d_model**2, 2 * (12 * d_model**2 + 10 * n * d_model), device)
    t_naive, t_flash, t_other = naive.time_s, flash.time_s, other.time_s
    return {"n": n, "d": d, "heads": heads, "device": device, "naive": naive, "flash": flash,
            "naive_s": t_naive, "flash_s": t_flash, "other_s": t_other,
            "core_speedup": t_naive / t_flash, "layer_speedup": (t_other + t_naive) / (t_other + t_flash),
            "attention_share_naive": t_naive / (t_other + t_naive)}


def speedup_sweep(ns=SHORT_NS, d: int = 64, heads: int = 16, device: str = "h200") -> dict:
    """:func:`short_sequence_times` over `ns`: {"n": [...], "core_speedup": [...], "layer_speedup": [...], ...}."""
    from tqdm.auto import tqdm
    rows = [short_sequence_times(n, d, heads, device) for n in tqdm(ns, desc="N sweep", leave=False)]
    return {"n": list(ns), **{k: [r[k] for r in rows] for k in ("core_speedup", "layer_speedup", "naive_s",
                                                                 "flash_s", "other_s", "attention_share_naive")}}


class ShortSequenceDashboard:
    """Sliders for N, d, heads and the device; the predicted speedup of flash2 over naive (chapter 11)."""

    def __init__(self, n: int = 512, d: int = 64, heads: int = 16, device: str = "h200"):
        self.n, self.d, self.heads, self.device = n, d, heads, device
        self._sweeps: dict = {}
        self.current = short_sequence_times(n, d, heads, device)

    def update(self, n=None, d=None, heads=None, device=None) -> dict:
        for name, value in (("n", n), ("d", d), ("heads", heads), ("device", device)):
            if value is not None:
                setattr(self, name, value)
        self.current = short_sequence_times(self.n, self.d, self.heads, self.device)
        return self.current

    def readout(self) -> str:
        c = self.current
        return (f"N={c['n']}, d={c['d']}, heads={c['heads']}, {c['device']}: attention core "
                f"{c['naive_s'] * 1e6:.1f} → {c['flash_s'] * 1e6:.1f} µs ({c['core_speedup']:.2f}×); whole layer "
                f"{c['layer_speedup']:.2f}× (attention was {c['attention_share_naive']:.0%} of it)")

    def sweep(self) -> dict:
        key = (self.d, self.heads, self.device)
        if key not in self._sweeps:
            self._sweeps[key] = speedup_sweep(SHORT_NS, self.d, self.heads, self.device)
        return self._sweeps[key]

    def figure(self):
        from flashsim.course.ch11.figures import plot_speedup_vs_n
        return plot_speedup_vs_n(self.sweep(), current=self.current, title=self.readout())

    @widget_or_figure
    def show(self):
        import ipywidgets as W

        from flashsim.model.hardware import PRESETS
        from flashsim.course.ch05.dashboards import png_image_widget, set_png
        n = W.SelectionSlider(options=list(SHORT_NS), value=self.n, description="N", continuous_update=False)
        d = W.SelectionSlider(options=[32, 64, 128, 256], value=self.d, description="d", continuous_update=False)
        heads = W.SelectionSlider(options=[1, 2, 4, 8, 16, 32, 64], value=self.heads, description="heads",
                                  continuous_update=False)
        device = W.Dropdown(options=sorted(PRESETS), value=self.device, description="device")
        img = png_image_widget(self.figure())

        def redraw(_=None):
            self.update(n=n.value, d=d.value, heads=heads.value, device=device.value)
            set_png(img, self.figure())

        for w in (n, d, heads, device):
            w.observe(redraw, names="value")
        return W.VBox([W.HBox([n, d]), W.HBox([heads, device]), img])


# --- 2. mask and dtype mismatches ---------------------------------------------------------------------------------
def mismatch_errors(n: int = 128, d: int = 32, flash_dtype: str = "fp16", flash_causal: bool = True,
                    ref_dtype: str | None = None, ref_causal: bool = True, ref_on_rounded_inputs: bool = True,
                    seed: int = 0) -> dict:
    """Run flash2 on the simulator and compare it with a reference that may use another mask or dtype (chapter 11).

    flash_dtype / flash_causal: what the kernel under test ran with. ref_dtype: None = float64 (exact), or the dtype
    of a plain implementation; ref_causal: the reference's mask; ref_on_rounded_inputs: the reference sees the
    inputs as the kernel stored them (rounded to flash_dtype) rather than the original fp32 ones.
    Returns {"row_error": (N,) max |diff| per row, "max", "median", "diagnosis", "plain_max"} where plain_max is
    the error of a plain implementation in flash_dtype with the right mask (the yardstick for "just rounding").
    """
    from flashsim.model.simulator import reference_outputs, simulate
    from flashsim.model.dtypes import round_to
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((1, n, d)).astype(np.float32) for _ in range(3))
    sim = simulate("flash2", n, d, dtype=flash_dtype, causal=flash_causal, inputs=(q, k, v), record_events=False)
    flash = np.asarray(sim.out[0], np.float64)
    stored = [round_to(x[0], flash_dtype) for x in (q, k, v)]
    ref_in = stored if ref_on_rounded_inputs else [x[0] for x in (q, k, v)]
    ref, _ = reference_outputs(*ref_in, causal=ref_causal, dtype=ref_dtype)
    exact, _ = reference_outputs(*stored, causal=flash_causal)
    plain, _ = reference_outputs(*stored, causal=flash_causal, dtype=flash_dtype)
    row = np.abs(flash - np.asarray(ref, np.float64)).max(axis=1)
    plain_max = float(np.abs(np.asarray(plain, np.float64) - exact).max())
    mx = float(row.max())
    if flash_causal != ref_causal:
        diagnosis = ("MASK MISMATCH: the error is O(1) in the first rows and falls to ~0 at the last row (row N-1 "
                     "sees every key with or without a causal mask). Give the reference the kernel's mask.")
    elif mx <= 4 * plain_max + 1e-7:
        diagnosis = ("ROUNDING ONLY: the difference is the size of the error any implementation in "
                     f"{flash_dtype} makes ({plain_max:.1e}); flash computes the same function. Compare against "
                     "float64 with a dtype-aware tolerance, not bitwise.")
    else:
        diagnosis = ("DTYPE/INPUT MISMATCH: larger than rounding in one dtype: the two sides saw different inputs "
                     "or dtypes. Feed the reference the inputs as the kernel stored them, or compare both to float64.")
    return {"row_error": row, "max": mx, "median": float(np.median(row)), "diagnosis": diagnosis,
            "plain_max": plain_max, "config": dict(n=n, d=d, flash_dtype=flash_dtype, flash_causal=flash_causal,
                                                   ref_dtype=ref_dtype, ref_causal=ref_causal,
                                                   ref_on_rounded_inputs=ref_on_rounded_inputs)}


class MismatchExplorer:
    """Choose the kernel's and the reference's mask and dtype; see the per-row error and a diagnosis (chapter 11)."""

    def __init__(self, n: int = 128, d: int = 32, **config):
        self.n, self.d = n, d
        self.config = dict(flash_dtype="fp16", flash_causal=True, ref_dtype=None, ref_causal=True,
                           ref_on_rounded_inputs=True)
        self.config.update(config)
        self._cache: dict = {}
        self.current = self._compute()

    def _compute(self) -> dict:
        key = tuple(sorted(self.config.items(), key=lambda kv: kv[0]))
        if key not in self._cache:
            self._cache[key] = mismatch_errors(self.n, self.d, **self.config)
        return self._cache[key]

    def update(self, **config) -> dict:
        unknown = set(config) - set(self.config)
        if unknown:
            raise ValueError(f"unknown setting(s) {sorted(unknown)}: use {sorted(self.config)}")
        self.config.update(config)
        self.current = self._compute()
        return self.current

    def figure(self):
        from flashsim.course.ch11.figures import plot_mismatch_rows
        return plot_mismatch_rows(self.current)

    @widget_or_figure
    def show(self):
        import ipywidgets as W

        from flashsim.course.ch05.dashboards import png_image_widget, set_png
        c = self.config
        fd = W.Dropdown(options=["fp16", "bf16", "fp32"], value=c["flash_dtype"], description="kernel dtype")
        fc = W.Checkbox(value=c["flash_causal"], description="kernel causal")
        rd = W.Dropdown(options=[("float64", None), ("fp32", "fp32"), ("fp16", "fp16"), ("bf16", "bf16")],
                        value=c["ref_dtype"], description="ref dtype")
        rc = W.Checkbox(value=c["ref_causal"], description="ref causal")
        rr = W.Checkbox(value=c["ref_on_rounded_inputs"], description="ref sees stored inputs")
        diag = W.HTML(f"<b>{self.current['diagnosis']}</b>")
        img = png_image_widget(self.figure())

        def redraw(_=None):
            self.update(flash_dtype=fd.value, flash_causal=fc.value, ref_dtype=rd.value, ref_causal=rc.value,
                        ref_on_rounded_inputs=rr.value)
            diag.value = f"<b>{self.current['diagnosis']}</b>"
            set_png(img, self.figure())

        for w in (fd, fc, rd, rc, rr):
            w.observe(redraw, names="value")
        return W.VBox([W.HBox([fd, fc]), W.HBox([rd, rc, rr]), diag, img])


# --- 3. not sub-quadratic -----------------------------------------------------------------------------------------
def flops_sweep(ns=SHORT_NS, d: int = 64, causal: bool = False) -> dict:
    """Matmul FLOPs of naive and flash2 forward against N (one head): both grow as N² (chapter 11)."""
    from flashsim.model.simulator import traffic
    return {"n": list(ns), "naive": [traffic("naive", n, d, causal=causal).flops for n in ns],
            "flash": [traffic("flash2", n, d, causal=causal).flops for n in ns],
            "flash_hbm": [traffic("flash2", n, d, causal=causal).hbm_bytes for n in ns],
            "naive_hbm": [traffic("naive", n, d, causal=causal).hbm_bytes for n in ns], "d": d, "causal": causal}


# --- 4. the bookkeeping bug ---------------------------------------------------------------------------------------
def rescale_drift(n: int = 512, d: int = 16, block: int = 32, trend: float = 4.0, seed: int = 0) -> dict:
    """One query row of attention computed online, with and without the rescale (chapter 11's bug).

    Scores are noise plus a linear ``trend`` over the row (trend = how much the score grows from the first key to
    the last, in units of the noise): with trend > 0 later blocks keep raising the max, which is exactly when the
    missing rescale bites; with the max in the first block the bug is invisible. Returns per-block
    {"blocks", "err_ok", "err_bug", "l_ok", "l_bug", "max_grows" (bool per block)} and the final errors.
    """
    from flashsim.model.attention.online_softmax import online_attention_row
    rng = np.random.default_rng(seed)
    scores = rng.standard_normal(n) + trend * np.arange(n) / max(n - 1, 1)   # (N,)
    values = rng.standard_normal((n, d))                                       # (N, d)
    out = {"blocks": [], "err_ok": [], "err_bug": [], "l_ok": [], "l_bug": [], "max_grows": []}
    prev_m = -math.inf
    steps_ok = list(online_attention_row(scores, values, block, rescale=True))
    steps_bug = list(online_attention_row(scores, values, block, rescale=False))
    for b, ((m, l, o), (_, lb, ob)) in enumerate(zip(steps_ok, steps_bug)):
        seen = min((b + 1) * block, n)
        s = scores[:seen]
        p = np.exp(s - s.max())
        exact = (p / p.sum()) @ values[:seen]                                  # (d,) attention over keys seen
        out["blocks"].append(b)
        out["err_ok"].append(float(np.abs(o - exact).max()))
        out["err_bug"].append(float(np.abs(ob - exact).max()))
        out["l_ok"].append(l)
        out["l_bug"].append(lb)
        out["max_grows"].append(bool(m > prev_m))
        prev_m = m
    out.update(final_err_ok=out["err_ok"][-1], final_err_bug=out["err_bug"][-1], n=n, d=d, block=block, trend=trend)
    return out


class RescaleDriftDashboard:
    """Sliders for the score trend and the block size; the drift of the buggy online softmax (chapter 11)."""

    def __init__(self, n: int = 512, d: int = 16, block: int = 32, trend: float = 4.0, seed: int = 0):
        self.n, self.d, self.block, self.trend, self.seed = n, d, block, trend, seed
        self.current = rescale_drift(n, d, block, trend, seed)

    def update(self, block=None, trend=None) -> dict:
        if block is not None:
            self.block = int(block)
        if trend is not None:
            self.trend = float(trend)
        self.current = rescale_drift(self.n, self.d, self.block, self.trend, self.seed)
        return self.current

    def figure(self):
        from flashsim.course.ch11.figures import plot_rescale_drift
        return plot_rescale_drift(self.current)

    @widget_or_figure
    def show(self):
        import ipywidgets as W

        from flashsim.course.ch05.dashboards import png_image_widget, set_png
        trend = W.FloatSlider(value=self.trend, min=-12.0, max=12.0, step=0.5, description="trend",
                              continuous_update=False)
        block = W.SelectionSlider(options=[8, 16, 32, 64, 128], value=self.block, description="block",
                                  continuous_update=False)
        img = png_image_widget(self.figure())

        def redraw(_=None):
            self.update(block=block.value, trend=trend.value)
            set_png(img, self.figure())

        trend.observe(redraw, names="value")
        block.observe(redraw, names="value")
        return W.VBox([W.HBox([trend, block]), img])
