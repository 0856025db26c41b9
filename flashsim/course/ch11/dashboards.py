"""Chapter 11 dashboards: four pitfalls, each on the course's dashboard base (``update(...)`` and ``current``,
testable without Jupyter; ``show()`` puts its controls, readout and figure on the page).

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

from flashsim.course.ch11.figures import (SHORT_NS, MismatchRowsPlot, RescaleDriftPlot, SpeedupVsNPlot,
                                          short_sequence_times, speedup_sweep)
from flashsim.course.kit.dashboard import Dashboard, Memo, choice, float_range, neighbours, slider, toggle
from flashsim.errors import FlashsimError
from flashsim.model.attention.online_softmax import online_attention_row
from flashsim.model.attention.reference import plain_attention, reference_attention
from flashsim.model.dtypes import round_to
from flashsim.model.hardware import device_names
from flashsim.model.simulator import simulate, traffic

__all__ = ["short_sequence_times", "speedup_sweep", "ShortSequenceDashboard", "mismatch_errors", "MismatchExplorer",
           "rescale_drift", "RescaleDriftDashboard", "flops_sweep", "SHORT_NS"]

# --- 1. short sequences: short_sequence_times and speedup_sweep (flashsim.course.ch11.figures) -----------------
class ShortSequenceDashboard(Dashboard):
    """Sliders for N, d, heads and the device; the predicted speedup of flash2 over naive (chapter 11)."""

    DS = (32, 64, 128, 256)
    HEADS = (1, 2, 4, 8, 16, 32, 64)
    plot = SpeedupVsNPlot
    layout = (("n", "d"), ("heads", "device"))

    def __init__(self, n: int = 512, d: int = 64, heads: int = 16, device: str = "h200"):
        self.n, self.d, self.heads, self.device = n, d, heads, device
        self._times = Memo(short_sequence_times)
        self._sweeps = Memo(self._sweep)
        self.update()

    def controls(self):
        return {"n": slider("N", [(f"{n:,}", n) for n in SHORT_NS]), "d": slider("d", self.DS),
                "heads": slider("heads", self.HEADS), "device": choice("device", device_names())}

    def apply(self, n=None, d=None, heads=None, device=None) -> dict:
        for name, value in (("n", n), ("d", d), ("heads", heads), ("device", device)):
            if value is not None:
                setattr(self, name, value)
        self.current = self._times(self.n, self.d, self.heads, self.device)
        return self.current

    def readout(self) -> str:
        c = self.current
        return (f"N={c['n']}, d={c['d']}, heads={c['heads']}, {c['device']}: attention core "
                f"{c['naive_s'] * 1e6:.1f} → {c['flash_s'] * 1e6:.1f} µs ({c['core_speedup']:.2f}×); whole layer "
                f"{c['layer_speedup']:.2f}× (attention was {c['attention_share_naive']:.0%} of it)")

    def sweep(self) -> dict:
        """The speedup over N for this d, heads and device. Memoised, and the sweeps one slider step away (d,
        heads) are computed ahead while the controls rest: a sweep takes ≈ 0.25 s on a 2-core CPU (18 L2-aware
        traffic calls), too long for a slider move."""
        sweep = self._sweeps(self.d, self.heads, self.device)
        if self._views:                         # only for a dashboard on the page
            self._sweeps.prefetch([(d, self.heads, self.device) for d in neighbours(self.DS, self.d)]
                                  + [(self.d, h, self.device) for h in neighbours(self.HEADS, self.heads)])
        return sweep

    def _sweep(self, d, heads, device) -> dict:
        return speedup_sweep(SHORT_NS, d, heads, device, progress=False, times=self._times)

    def plot_args(self) -> dict:
        c = self.current
        return {"sweep": self.sweep(), "current": c,
                "title": f"d={c['d']}, {c['heads']} heads, {c['device']}: flash2 over naive at N={c['n']}: "
                         f"{c['core_speedup']:.2f}× (core), {c['layer_speedup']:.2f}× (layer)"}


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
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((1, n, d)).astype(np.float32) for _ in range(3))
    sim = simulate("flash2", n, d, dtype=flash_dtype, causal=flash_causal, inputs=(q, k, v), record_events=False)
    flash = np.asarray(sim.out[0], np.float64)
    stored = [round_to(x[0], flash_dtype) for x in (q, k, v)]
    ref_in = stored if ref_on_rounded_inputs else [x[0] for x in (q, k, v)]
    ref = (reference_attention(*ref_in, causal=ref_causal) if ref_dtype is None
           else plain_attention(*ref_in, causal=ref_causal, dtype=ref_dtype)[0])
    exact = reference_attention(*stored, causal=flash_causal)
    plain = plain_attention(*stored, causal=flash_causal, dtype=flash_dtype)[0]
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


class MismatchExplorer(Dashboard):
    """Choose the kernel's and the reference's mask and dtype; see the per-row error and a diagnosis (chapter 11).

    The five controls are ``config``'s keys: flash_dtype, flash_causal, ref_dtype (None or "float64": exact),
    ref_causal, ref_on_rounded_inputs; ``update(**config)`` changes them, ``current`` is :func:`mismatch_errors`' result."""

    plot = MismatchRowsPlot
    layout = (("flash_dtype", "flash_causal"), ("ref_dtype", "ref_causal", "ref_on_rounded_inputs"))

    def __init__(self, n: int = 128, d: int = 32, **config):
        self.n, self.d = n, d
        self.config = dict(flash_dtype="fp16", flash_causal=True, ref_dtype=None, ref_causal=True,
                           ref_on_rounded_inputs=True)
        unknown = set(config) - set(self.config)
        if unknown:
            raise FlashsimError(f"unknown setting(s) {sorted(unknown)}: use {sorted(self.config)}")
        self.config.update(config)
        self._cache: dict = {}
        self.update()

    def controls(self):
        return {"flash_dtype": choice("kernel dtype", ["fp16", "bf16", "fp32"]),
                "flash_causal": toggle("kernel causal"),
                "ref_dtype": choice("ref dtype", ["float64", "fp32", "fp16", "bf16"]),
                "ref_causal": toggle("ref causal"), "ref_on_rounded_inputs": toggle("ref sees stored inputs")}

    def control_state(self) -> dict:
        return {**self.config, "ref_dtype": self.config["ref_dtype"] or "float64"}

    def update(self, **config) -> dict:
        unknown = set(config) - set(self.config)
        if unknown:
            raise FlashsimError(f"unknown setting(s) {sorted(unknown)}: use {sorted(self.config)}")
        if "ref_dtype" in config and config["ref_dtype"] is None:
            config["ref_dtype"] = "float64"           # ref_dtype=None means the float64 reference, not "unchanged"
        return super().update(**config)

    def apply(self, **config) -> dict:
        if config.get("ref_dtype") == "float64":
            config["ref_dtype"] = None
        self.config.update(config)
        key = tuple(sorted(self.config.items(), key=lambda kv: kv[0]))
        if key not in self._cache:
            self._cache[key] = mismatch_errors(self.n, self.d, **self.config)
        self.current = self._cache[key]
        return self.current

    def readout(self) -> str:
        return f"<b>{self.current['diagnosis']}</b>"

    def plot_args(self) -> dict:
        return {"result": self.current}


# --- 3. not sub-quadratic -----------------------------------------------------------------------------------------
def flops_sweep(ns=SHORT_NS, d: int = 64, causal: bool = False) -> dict:
    """Matmul FLOPs of naive and flash2 forward against N (one head): both grow as N² (chapter 11)."""
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


class RescaleDriftDashboard(Dashboard):
    """Sliders for the score trend and the block size; the drift of the buggy online softmax (chapter 11)."""

    BLOCKS = (8, 16, 32, 64, 128)
    plot = RescaleDriftPlot

    def __init__(self, n: int = 512, d: int = 16, block: int = 32, trend: float = 4.0, seed: int = 0):
        self.n, self.d, self.block, self.trend, self.seed = n, d, int(block), float(trend), seed
        self.update()

    def controls(self):
        return {"trend": float_range("trend", -12.0, 12.0, 0.5), "block": slider("block", self.BLOCKS)}

    def apply(self, block=None, trend=None) -> dict:
        if block is not None:
            self.block = int(block)
        if trend is not None:
            self.trend = float(trend)
        self.current = rescale_drift(self.n, self.d, self.block, self.trend, self.seed)
        return self.current

    def readout(self) -> str:
        c = self.current
        return (f"trend {self.trend:+.1f}, block {self.block}: final error with rescale {c['final_err_ok']:.1e}, "
                f"without {c['final_err_bug']:.1e}")

    def plot_args(self) -> dict:
        return {"drift": self.current}
