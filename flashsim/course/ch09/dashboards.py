"""Chapter 09 dashboards and data: why the speedup is real.

* :func:`theta_sweep`: flash HBM bytes over SRAM sizes M and lengths N, against FA1's Θ(N²d²/M);
* :class:`SpeedupDashboard`: sliders for N, d, SRAM and the device; naive vs flash bytes, FLOPs, arithmetic
  intensity and the roofline time (with and without the L2 model), driven by ``update`` (state in ``current``);
* :func:`measured_block_sweep`: the real kernel's bytes (``flashsim.course.kit.real_gpu.compare``) over BLOCK_M,
  the kernel's stand-in for M;
* :func:`l2_rows`: requested vs DRAM bytes of the flash kernel: measured by ncu on an H200 (the recorded sweep
  ``kernels_h200``, :mod:`flashsim.course.kit.results`), next to the L2 model's prediction (:mod:`flashsim.model.l2`).
"""
from __future__ import annotations

import json
from pathlib import Path

from flashsim.model.units import format_bytes
from flashsim.course.ch09.figures import SRAM_KIBS, RooflinePlot, theta_sweep
from flashsim.course.kit.dashboard import Dashboard, Memo, choice, neighbours, slider
from flashsim.course.kit.real_gpu import compare, measured_on
from flashsim.course.kit.results import load_result, result_source
from flashsim.errors import FlashsimError
from flashsim.model.hardware import device_names
from flashsim.model.kernel_io import kernel_dram, kernel_io
from flashsim.model.roofline import roofline
from flashsim.model.simulator import traffic

__all__ = ["theta_sweep", "SpeedupDashboard", "measured_block_sweep", "l2_rows", "SRAM_KIBS", "SPEEDUP_NS"]

#: the dashboard runs the L2 model only below this many (head, row block, column block) tiles
L2_MAX_TILES = 600_000
#: sequence lengths of the dashboard's slider
SPEEDUP_NS = (512, 1024, 2048, 4096, 8192, 16384, 32768)


class SpeedupDashboard(Dashboard):
    """N, d, SRAM and device sliders: naive vs flash2 bytes, FLOPs and roofline times (chapter 09).

    ``current`` = {"naive", "flash" (Traffic with l2=True: requested and DRAM bytes), "speedup_requested",
    "speedup_dram", "theta" (N²d²/M)}. ``update(n=..., d=..., sram_kib=..., device=...)`` recomputes it.
    """

    DS = (32, 64, 128, 256)
    plot = RooflinePlot
    layout = (("n", "d"), ("sram_kib", "device"))

    def __init__(self, n: int = 4096, d: int = 64, sram_kib: int = 228, device: str = "h200", heads: int = 16):
        self.n, self.d, self.sram_kib, self.device, self.heads = n, d, sram_kib, device, heads
        self.current: dict = {}
        self._compute = Memo(self._state)
        self.update()

    def controls(self):
        return {"n": slider("N", [(f"{n:,}", n) for n in SPEEDUP_NS]), "d": slider("d", self.DS),
                "sram_kib": slider("SRAM (KiB)", SRAM_KIBS), "device": choice("device", device_names())}

    def apply(self, n=None, d=None, sram_kib=None, device=None) -> dict:
        for name, value in (("n", n), ("d", d), ("sram_kib", sram_kib), ("device", device)):
            if value is not None:
                setattr(self, name, value)
        key = (int(self.n), int(self.d), int(self.sram_kib), self.device)
        self.current = self._compute(*key)
        # the states one slider step away, computed while the controls rest: the L2 model takes 0.1-0.3 s
        n, d, kib, dev = key
        if self._views:                         # only for a dashboard on the page
            self._compute.prefetch([(x, d, kib, dev) for x in neighbours(SPEEDUP_NS, n)]
                                   + [(n, x, kib, dev) for x in neighbours(self.DS, d)]
                                   + [(n, d, x, dev) for x in neighbours(SRAM_KIBS, kib)])
        return self.current

    def _state(self, n: int, d: int, sram_kib: int, device: str) -> dict:
        """The dashboard's ``current`` for these settings (a pure function: :class:`Memo` keeps it)."""
        m = sram_kib * 1024
        kw = dict(heads=self.heads, device=device, l2=True)
        naive = traffic("naive", n, d, **kw)
        try:
            flash = traffic("flash2", n, d, sram_bytes=m, heads=self.heads, device=device)
            tiles = self.heads * -(-n // flash.block_r) * -(-n // flash.block_c)
            if tiles <= L2_MAX_TILES:   # the L2 model walks every tile access: keep a slider move under a second
                flash = traffic("flash2", n, d, sram_bytes=m, **kw)
        except FlashsimError as exc:
            return {"error": str(exc), "naive": naive, "n": n, "d": d, "sram_kib": sram_kib}
        r_naive = roofline(naive.flops, naive.hbm_bytes, device)
        r_flash = roofline(flash.flops, flash.hbm_bytes, device)
        return {"n": n, "d": d, "sram_kib": sram_kib, "device": device,
                "naive": naive, "flash": flash, "roofline_naive": r_naive, "roofline_flash": r_flash,
                "speedup_requested": r_naive.time_s / r_flash.time_s,
                "speedup_dram": naive.time_s / flash.time_s if flash.dram_bytes is not None else None,
                "theta": n**2 * d**2 / m}

    def readout(self) -> str:
        c = self.current
        if "error" in c:
            return f"N={c['n']}, d={c['d']}, SRAM {c['sram_kib']} KiB: {c['error']}"
        nv, fl = c["naive"], c["flash"]
        dram = (f"{format_bytes(fl.dram_bytes)} DRAM" if fl.dram_bytes is not None else
                "L2 model skipped: too many tiles for a slider")
        with_l2 = f"{c['speedup_dram']:.1f}× with L2" if c["speedup_dram"] is not None else "L2 not modelled"
        return (f"N={c['n']}, d={c['d']}, {self.heads} heads, SRAM {c['sram_kib']} KiB (Br={fl.block_r}, "
                f"Bc={fl.block_c}), {c['device']}: naive {format_bytes(nv.hbm_bytes)}, {nv.arithmetic_intensity:.0f} "
                f"FLOP/B, {c['roofline_naive'].time_s * 1e3:.3g} ms; flash {format_bytes(fl.hbm_bytes)} requested "
                f"({dram}), {c['roofline_flash'].time_s * 1e3:.3g} ms ({c['roofline_flash'].bound}-bound). "
                f"Speedup {c['speedup_requested']:.1f}× ({with_l2})")

    def plot_args(self) -> dict:
        c = self.current
        title = f"N={c['n']}, d={c['d']}, {self.heads} heads, SRAM {c['sram_kib']} KiB, {self.device}"
        if "error" in c:
            return {"points": {"naive": c["naive"]}, "device": self.device, "title": f"{title}: {c['error']}"}
        return {"points": {"naive": c["naive"], "flash2 (requested)": c["flash"]}, "device": self.device,
                "dram": c["flash"], "title": f"{title}: speedup {c['speedup_requested']:.1f}× (requested bytes)"}


def measured_block_sweep(block_ms=(16, 32, 64, 128), n: int | None = None, d: int | None = None) -> dict:
    """The flash kernel's bytes over BLOCK_M, measured (``flashsim.course.kit.real_gpu.compare``) and simulated.

    Returns {block_m: Comparison}. K and V are re-read once per row block: their bytes fall as 1/BLOCK_M, the
    kernel's version of the 1/M in Θ(N²d²/M).
    """
    from tqdm.auto import tqdm
    out = {}
    for i, bm in enumerate(tqdm(block_ms, desc="BLOCK_M sweep", leave=False)):
        out[bm] = compare("flash_fwd", n=n, d=d, block_m=bm, block_n=32, quiet=i > 0)
    return out


def _ncu_rows(result: dict, kernel: str, max_tiles: int = 300_000) -> list:
    """Rows of an ncu sweep (benchmarks/gpu_validate.py's JSON). Where it has no simulated numbers yet, the
    requested bytes come from :func:`flashsim.model.kernel_io.kernel_io` and the DRAM bytes from the L2 model
    (:func:`flashsim.model.kernel_io.kernel_dram`, skipped for configurations with more than `max_tiles` tiles)."""
    rows = []
    for r in result.get("ncu_sweep", []):
        cfg, m, s = r.get("config", {}), r.get("measured") or {}, r.get("simulated") or {}
        if cfg.get("kernel") != kernel or "total" not in m or r.get("set") == "tma":
            continue                    # TMA copies bypass the counters of requested bytes: not comparable here
        t = m["total"]
        args = (kernel, cfg["n"], cfg["d"], cfg.get("block_m", 128), cfg.get("block_n", 64))
        kw = dict(causal=bool(cfg.get("causal")), dtype=cfg.get("dtype", "fp16"), batch=cfg.get("batch", 1),
                  heads=cfg.get("heads", 1))
        if "load_bytes" in s:
            requested = s["load_bytes"] + s["store_bytes"]
            dram_sim = s.get("dram_read_bytes", 0) + s.get("dram_write_bytes", 0)
        else:
            io = kernel_io(*args, **kw)
            requested = io.load_bytes + io.store_bytes
            tiles = kw["batch"] * kw["heads"] * -(-cfg["n"] // args[3]) * -(-cfg["n"] // args[4])
            dram_sim = kernel_dram(*args, **kw)["total"].dram_bytes if tiles <= max_tiles else None
        rows.append({"label": f"B={kw['batch']} H={kw['heads']} N={cfg['n']} d={cfg['d']}"
                              f"{' causal' if kw['causal'] else ''}",
                     "requested": requested, "dram_simulated": dram_sim,
                     "requested_measured": t.get("global_load_bytes", 0) + t.get("global_store_bytes", 0),
                     "dram_measured": t.get("dram_read_bytes", 0) + t.get("dram_write_bytes", 0)})
    return rows


def l2_rows(kernel: str = "flash_fwd", configs=None, path: str | None = None) -> dict:
    """Requested vs DRAM bytes of `kernel`: {"source", "rows": [{"label", "requested", "dram_simulated",
    "requested_measured", "dram_measured"}]}: ncu numbers from the recorded H200 sweep ``kernels_h200``
    (:mod:`flashsim.course.kit.results`; source "Nsight Compute sweep, measured on <GPU>, <date>"), or from the JSON
    file `path` (source "ncu on H200: <file>"); where that
    has no rows of `kernel`, the L2 model alone at `configs` (source "L2 model", measured entries None)."""
    try:
        if path is None:
            source, rows = result_source("kernels_h200"), _ncu_rows(load_result("kernels_h200"), kernel)
        else:
            source, rows = path, _ncu_rows(json.loads(Path(path).read_text()), kernel)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        rows = []
    if rows and path is None:   # what a chapter prints: the GPU and date from the record's own metadata
        return {"source": f"Nsight Compute sweep, {measured_on('kernels_h200')}", "rows": rows}
    if rows:
        return {"source": f"ncu on H200: {Path(source).name}", "rows": rows}
    configs = configs or ((1, 16, 1024, 64), (1, 16, 4096, 64), (2, 16, 4096, 128), (1, 8, 16384, 128))
    rows = []
    for b, h, n, d in configs:
        io = kernel_io(kernel, n, d, 128, 64, batch=b, heads=h)
        dram = kernel_dram(kernel, n, d, 128, 64, batch=b, heads=h, hardware="h200")["total"]
        rows.append({"label": f"B={b} H={h} N={n} d={d}", "requested": io.load_bytes + io.store_bytes,
                     "dram_simulated": dram.dram_bytes, "requested_measured": None, "dram_measured": None})
    return {"source": "L2 model (flashsim.model.l2; no ncu sweep of this kernel recorded)", "rows": rows}
