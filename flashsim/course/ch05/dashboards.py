"""Chapter 05 dashboards: the FlashAttention forward loop stepped event by event, and HBM traffic vs block size.

Both are built on :class:`flashsim.course.kit.dashboard.Dashboard`, so tests drive them through ``update(...)``
without a Jupyter kernel::

    d = TrafficDashboard()          # FA1 Fig. 2 middle: N=1024, d=64, batch 64 x 16 heads, fp16, A100
    d.update(block_c=128)
    d.current_traffic.hbm_bytes     # 3.56 GB, as the paper says

:class:`FlashStepper` (introduced here) is reused by chapter 07 for Algorithm 4.
"""
from __future__ import annotations

import math

import numpy as np

from flashsim.course.ch05.figures import FLASH_COL_TENSORS, TileStatePlot, TrafficVsBlockPlot
from flashsim.course.ch05.traffic import BLOCK_CS, BlockSweep
from flashsim.course.kit.dashboard import Dashboard, choice, int_range, slider
from flashsim.model.attention.flash import run_flash
from flashsim.model.dtypes import round_to
from flashsim.model.hardware import PRESETS
from flashsim.model.paper import PAPER_FIG2_MIDDLE_GB
from flashsim.model.attention.reference import reference_attention
from flashsim.model.problem import make_problem
from flashsim.model.simulator import simulate, traffic

__all__ = ["FlashStepper", "TrafficDashboard", "flash_vs_naive_errors", "loop_order_bytes"]


# --- the loop, stepped -----------------------------------------------------------------------------------------
class FlashStepper(Dashboard):
    """Step through a tiled attention loop on the simulator, one :class:`~flashsim.model.memory.Event` at a time.

    It runs :func:`flashsim.model.attention.flash.run_flash` once (small N: every event is kept) and replays the event
    log: after step ``i`` it knows which tiles are in SRAM, the running m and l of every row the loop has touched,
    and how many times each row of the output has been written. ``update(step=i)`` moves; ``state`` is what
    :func:`flashsim.plots.plot_tile_state` draws.

    algo: "flash1" (Algorithm 1, outer loop over K/V) or "flash2" (outer loop over Q); backward=True steps
    Algorithm 4 after the forward (chapter 07).
    """

    def __init__(self, n: int = 16, d: int = 8, block_r: int = 4, block_c: int = 4, algo: str = "flash1",
                 backward: bool = False, causal: bool = False, dtype: str = "fp32", seed: int = 0,
                 sram_bytes: int | None = None):
        self.n, self.d, self.block_r, self.block_c, self.algo = n, d, block_r, block_c, algo
        self.backward = backward
        self.problem = make_problem(algo, n, d, block_r=block_r, block_c=block_c, dtype=dtype, causal=causal,
                                    backward=backward, device="h200", sram_bytes=sram_bytes)
        rng = np.random.default_rng(seed)
        q, k, v, do = (rng.standard_normal((n, d)).astype(np.float32) for _ in range(4))
        self.run = run_flash(self.problem, q, k, v, do=do if backward else None)
        # a step is a load, compute or store; the frees in between are applied, not shown as steps of their own
        self.all_events = list(self.run.memory.events)
        self.events = [ev for ev in self.all_events if ev.kind != "free"]
        self.n_steps = len(self.events)
        self.first_backward_step = 0
        if backward:  # the forward's steps come first: count them with a forward-only run of the same problem
            fwd = run_flash(make_problem(algo, n, d, block_r=block_r, block_c=block_c, dtype=dtype, causal=causal,
                                         device="h200", sram_bytes=sram_bytes), q, k, v)
            self.first_backward_step = sum(ev.kind != "free" for ev in fwd.memory.events)
        self.tr, self.tc = math.ceil(n / block_r), math.ceil(n / block_c)
        moved = {ev.tensor for ev in self.events if ev.kind in ("load", "store")}
        self.tensors = [t for t in ("Q", "K", "V", "O", "m", "l", "L", "dO", "D", "dQ", "dK", "dV") if t in moved]
        self._snapshots = self._replay()
        self._rows_lim = self._row_ranges()
        self.step = 0
        self.update(step=0)

    plot = TileStatePlot
    figure_class = "flashsim-flash-stepper-plot"

    def controls(self):
        return {"step": int_range("event", 0, max(self.n_steps - 1, 0), play_ms=self.interval_ms, clamp=True,
                                  width="60%")}

    #: the Play button's interval (ms)
    interval_ms = 350

    # which tensors are blocked by rows of Q (Tr blocks) and which by rows of K/V (Tc blocks)
    ROW_TENSORS = ("Q", "O", "m", "l", "L", "lse", "dO", "dQ", "D")
    COL_TENSORS = FLASH_COL_TENSORS

    def _block_count(self, tensor: str) -> int:
        return self.tc if tensor in self.COL_TENSORS else self.tr

    def _replay(self) -> list[dict]:
        """One snapshot per event: SRAM contents, m and l per row, O-row write counts, bytes so far."""
        in_sram: dict[str, tuple] = {}
        m = np.full(self.n, np.nan)
        l = np.full(self.n, np.nan)
        o = np.full(self.n, np.nan)  # first column of O as the loop has it (normalised), per row
        writes: dict[str, np.ndarray] = {}
        read = written = 0
        snaps = []
        for ev in self.all_events:
            cur = None
            if ev.kind == "load":
                tile = tuple(ev.tile)
                key = f"{ev.tensor}{tile}"
                in_sram[key] = (ev.tensor, tile)
                cur = (ev.tensor, tile)
                read += ev.nbytes
            elif ev.kind == "free":
                # SRAM copies carry Memory's default name "<tensor><tile>", so a free names the load it ends
                in_sram.pop(ev.tensor, None)
            elif ev.kind == "store":
                written += ev.nbytes
                cur = (ev.tensor, tuple(ev.tile))
                rows = self._rows_of(ev.tensor, ev.tile)
                if rows is not None:
                    writes.setdefault(ev.tensor, np.zeros(self.n))[rows] += 1
            elif ev.kind == "compute":
                cur = ("S", tuple(ev.tile))
            if ev.stats:
                rows = self._stats_rows(ev)
                if rows is not None:
                    for name, arr in (("m", m), ("l", l)):
                        if name in ev.stats and ev.stats[name] is not None:
                            vals = np.asarray(ev.stats[name], float).ravel()
                            arr[rows.start: rows.start + min(vals.size, rows.stop - rows.start)] = \
                                vals[: rows.stop - rows.start]
                    if ev.stats.get("O") is not None:
                        vals = np.asarray(ev.stats["O"], float)[:, 0]
                        o[rows.start: rows.start + vals.size] = vals
            if ev.kind == "free":
                continue
            snaps.append({"in_sram": set(in_sram.values()), "m": m.copy(), "l": l.copy(), "o": o.copy(),
                          "writes": {k: v.copy() for k, v in writes.items()}, "read": read, "written": written,
                          "current": cur})
        return snaps

    def _row_ranges(self) -> dict:
        """{row label: (low, high)} over the whole run, so that the per-row plots keep their axes while stepping."""
        def span(arrays):
            vals = np.concatenate([a[np.isfinite(a)] for a in arrays] + [np.zeros(1)])
            return float(min(0.0, vals.min())), float(max(0.0, vals.max()))
        snaps = self._snapshots
        return {"running max m": span([s["m"] for s in snaps]), "running sum l": span([s["l"] for s in snaps]),
                "O[r, 0] so far": span([s["o"] for s in snaps]),
                **{f"{t} writes per row": span([s["writes"][t] for s in snaps if t in s["writes"]])
                   for t in ("O", "dQ")}}

    def _rows_of(self, tensor: str, tile) -> slice | None:
        if not tile or tensor not in self.ROW_TENSORS + self.COL_TENSORS:
            return None
        b = self.block_c if tensor in self.COL_TENSORS else self.block_r
        i = tile[0]
        return slice(i * b, min((i + 1) * b, self.n))

    def _stats_rows(self, ev) -> slice | None:
        """Rows of Q the event's stats belong to: tile (i, j) of S, or tile (i,) of a row tensor."""
        tile = tuple(ev.tile)
        if not tile:
            return None
        if len(tile) >= 2 or ev.tensor in self.ROW_TENSORS or ev.tensor in ("S", "P", ""):
            i = tile[0]
            return slice(i * self.block_r, min((i + 1) * self.block_r, self.n))
        return None

    def _state(self, step: int) -> dict:
        snap = self._snapshots[step] if self._snapshots else {"in_sram": set(), "m": np.full(self.n, np.nan),
                                                             "l": np.full(self.n, np.nan), "writes": {},
                                                             "o": np.full(self.n, np.nan), "read": 0, "written": 0,
                                                             "current": None}
        ev = self.events[step] if self.events else None
        blocks = {t: self._block_count(t) for t in self.tensors}
        cur = snap["current"]
        current = set()
        if cur is not None and cur[1]:
            if cur[0] in ("S", "dS", "P") and len(cur[1]) == 2:  # a compute on tile (i, j): Q_i with K_j, V_j
                i, j = cur[1]
                current = {("Q", i), ("K", j), ("V", j)}
            else:
                current = {(cur[0], cur[1][0])}
        in_sram = {(t, tile[0]) for t, tile in snap["in_sram"] if tile}
        out_name = "dQ" if self.backward and "dQ" in snap["writes"] else "O"
        rows = {"running max m": snap["m"], "running sum l": snap["l"], "O[r, 0] so far": snap["o"],
                f"{out_name} writes per row": snap["writes"].get(out_name, np.full(self.n, np.nan))}
        caption = (f"{self.algo}, N={self.n}, d={self.d}, Br={self.block_r}, Bc={self.block_c}: "
                   f"HBM read {snap['read']:,} B, written {snap['written']:,} B so far.")
        title = "" if ev is None else (f"step {step + 1}/{self.n_steps}: {ev.kind} {ev.tensor}"
                                       f"{'' if not ev.tile else tuple(ev.tile)}"
                                       f"{f' ({ev.nbytes:,} B)' if ev.nbytes else ''}"
                                       f"{f' {ev.flops:,} FLOPs' if ev.flops else ''}; "
                                       f"SRAM in use {ev.sram_in_use_bytes:,} B"
                                       f"{' — ' + ev.note if ev.note else ''}")
        return {"step": step, "event": ev, "blocks": blocks, "in_sram": in_sram, "current": current, "rows": rows,
                "title": title, "caption": caption, "m": snap["m"], "l": snap["l"], "o": snap["o"], "read": snap["read"],
                "written": snap["written"], "writes": snap["writes"], "rows_lim": self._rows_lim}

    def apply(self, step: int | None = None) -> dict:
        """Move to event `step` (clamped to the log); returns the new state."""
        if step is not None:
            self.step = int(min(max(step, 0), max(self.n_steps - 1, 0)))
        self.state = self._state(self.step)
        return self.state

    def plot_args(self) -> dict:
        return {"state": self.state}


# --- traffic vs block size -------------------------------------------------------------------------------------
class TrafficDashboard(Dashboard):
    """HBM traffic of the FlashAttention forward pass as the K/V block size Bc moves (FA1 Fig. 2 middle).

    Defaults are the paper's: N=1024, d=64, batch 64 × 16 heads (1024 independent heads), fp16 storage with fp16
    statistics, Algorithm 1 (flash1), A100. ``update(block_c=...)`` moves the slider; ``current_traffic`` is
    :func:`flashsim.traffic`'s answer there; ``sweep()`` holds every block size's.

    Introduced in chapter 05.
    """

    BLOCK_CS = BLOCK_CS
    plot = TrafficVsBlockPlot
    layout = (("block_c",), ("device",))
    readout_class = "flashsim-traffic-readout"
    figure_class = "flashsim-traffic-plot"

    def __init__(self, n: int = 1024, d: int = 64, heads: int = 16, algo: str = "flash1", dtype: str = "fp16",
                 stats_dtype: str = "fp16", device: str = "a100", block_c: int = 64, block_r: int = 16,
                 block_cs=BLOCK_CS, batch: int = 64):
        self.n, self.d, self.heads, self.dtype, self.stats_dtype, self.device = n, d, heads, dtype, stats_dtype, device
        self.batch = batch
        self.block_r = block_r
        self.block_cs = tuple(block_cs)
        self.algo = algo
        self._sweep = BlockSweep(n, d, heads, algo, dtype, stats_dtype, block_r, self.block_cs, batch)
        self.block_c = block_c
        self.current_traffic = self.traffic_for(block_c)

    def controls(self):
        return {"block_c": slider("block_c", self.block_cs, width="480px", css_class="flashsim-block-c-slider"),
                "device": choice("device", sorted(PRESETS))}

    def traffic_for(self, block_c: int, algo: str | None = None):
        """flashsim.traffic at this block size, or the SramCapacityError when no Br makes the tiles fit (memoised).

        Algorithm 1's bytes do not depend on Br, so the largest Br ≤ ``block_r`` (halving) whose tile set fits the
        device's SRAM is used: at Bc = 512 on an A100 that is Br = 8.
        """
        return self._sweep.traffic_for(block_c, self.device, algo)

    def sweep(self, algo: str | None = None) -> dict:
        """{block_c: Traffic} over the slider's block sizes."""
        return {bc: self.traffic_for(bc, algo) for bc in self.block_cs}

    @property
    def is_paper_setting(self) -> bool:
        return self._sweep.is_paper_setting

    def apply(self, block_c: int | None = None, device: str | None = None):
        """Move to a block size (and/or switch device preset); returns the new current Traffic, or the
        SramCapacityError saying why that block does not fit."""
        if device is not None:
            self.device = device
        if block_c is not None:
            self.block_c = int(block_c)
        self.current_traffic = self.traffic_for(self.block_c)
        return self.current_traffic

    def fits(self, block_c: int | None = None) -> bool:
        return not isinstance(self.traffic_for(block_c or self.block_c), Exception)

    def readout(self) -> str:
        t = self.current_traffic
        if isinstance(t, Exception):
            return f"{self.algo}, Bc = {self.block_c} on {self.device}: does not fit. {t}"
        paper = ""
        if self.is_paper_setting and self.block_c in PAPER_FIG2_MIDDLE_GB:
            paper = f" (paper: {PAPER_FIG2_MIDDLE_GB[self.block_c]:.2f} GB)"
        return (f"{self.algo}, Bc = {self.block_c}: {t.hbm_bytes / 1e9:.3f} GB{paper} = "
                f"{t.hbm_read_bytes / 1e9:.3f} GB read + {t.hbm_write_bytes / 1e9:.3f} GB written; "
                f"peak SRAM {t.sram_peak_bytes / 1024:.1f} KiB of {self.device}'s "
                f"{t.sram_bytes / 1024:.0f} KiB (Br = {t.block_r})")

    def plot_args(self) -> dict:
        return self._sweep.plot_args(self.device, current=self.block_c)


# --- exact, not bitwise ----------------------------------------------------------------------------------------
def flash_vs_naive_errors(n: int = 256, d: int = 64, dtype: str = "fp16", seed: int = 0) -> dict:
    """Run naive (Algorithm 0) and flash2 on the simulator with the same inputs; return the outputs' differences.

    {"flash - exact": ..., "naive - exact": ..., "flash - naive": ...} (arrays), "bitwise_equal" (bool), "max"
    {label: max |difference|} and the two Simulations ("flash", "naive"). Exact = float64 attention on the inputs
    as stored (rounded to `dtype`).

    Introduced in chapter 05.
    """
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((1, n, d), dtype=np.float32) for _ in range(3))
    flash = simulate("flash2", n, d, dtype=dtype, inputs=(q, k, v), record_events=False)
    naive = simulate("naive", n, d, dtype=dtype, inputs=(q, k, v), record_events=False)
    exact = reference_attention(*(round_to(x[0], dtype) for x in (q, k, v)))   # float64
    of, on = np.asarray(flash.out[0], np.float64), np.asarray(naive.out[0], np.float64)
    diffs = {"flash - exact": of - exact, "naive - exact": on - exact, "flash - naive": of - on}
    return {**diffs, "bitwise_equal": bool(np.array_equal(of, on)),
            "max": {k_: float(np.abs(x).max()) for k_, x in diffs.items()}, "flash": flash, "naive": naive}


def loop_order_bytes(n: int = 1024, d: int = 64, block_r: int = 64, block_c: int = 64, dtype: str = "fp16",
                     device: str = "a100") -> dict:
    """{algo: {tensor: read + write bytes}} for flash1 and flash2 at the same blocks (chapter 05's FA1 vs FA2)."""
    out = {}
    for algo in ("flash1", "flash2"):
        t = traffic(algo, n, d, block_r=block_r, block_c=block_c, dtype=dtype, device=device)
        names = set(t.read_bytes_by_tensor) | set(t.write_bytes_by_tensor)
        out[algo] = {k: t.read_bytes_by_tensor.get(k, 0) + t.write_bytes_by_tensor.get(k, 0) for k in sorted(names)}
    return out
