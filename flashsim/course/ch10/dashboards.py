"""Chapter 10 dashboards and measurements: the CPU view, where the caches play SRAM.

* :func:`cpu_hierarchy`: this machine's caches (sysfs), next to a GPU preset's levels;
* :func:`cpu_time_memory`: :func:`flashsim.cpu.flash_attention_cpu` (numba, blocked, float32) against
  :func:`flashsim.cpu.naive_attention_numpy`, time and peak memory *measured here* over N;
* :class:`CacheBlockDashboard`: block sizes against cache sizes: the working set of one step of the course's CPU
  kernel (:func:`flashsim.cpu.step_working_set_bytes`) and the measured time, with ``update(block_r=...,
  block_c=...)`` and ``current`` testable without Jupyter.

Without numba (a lab-only install) both say so in one line and show the measurements recorded on a CPU instead
(:func:`recorded_time_memory`, the block sweep of the same record).
"""
from __future__ import annotations

import time

import numpy as np

from flashsim.course import pick
from flashsim.course.ch10.figures import BlockCachePlot
from flashsim.course.kit.dashboard import Dashboard, Memo, neighbours, slider
from flashsim.course.kit.optional import missing
from flashsim.course.kit.results import load_result, result_source
from flashsim import cpu        # cpu.flash_attention_cpu loads its numba kernel on first use (an optional dependency)
from flashsim.cpu import (default_blocks, flash_extra_bytes, naive_attention_numpy, naive_extra_bytes,
                          step_working_set_bytes)
from flashsim.errors import FlashsimError
from flashsim.measure.peak_memory import peak_memory_cpu
from flashsim.model.attention.reference import reference_attention
from flashsim.model.hardware import _read_cache_bytes, get_device

__all__ = ["cpu_hierarchy", "cpu_time_memory", "recorded_time_memory", "CacheBlockDashboard", "time_call",
           "CPU_BLOCK_CS"]

#: block_c values of the dashboard (multiples of 64, one packed panel of Kᵀ)
# block_c values of the sweep and slider: every 64 up to 1024, then past a typical per-core L2 (1–2 MiB)
CPU_BLOCK_CS = tuple(range(64, 1024 + 1, 64)) + (1536, 2048, 3072, 4096)


def cpu_hierarchy() -> dict:
    """{"L1d", "L2", "L3"} bytes of this CPU (sysfs; None where unknown), cores, and the CPU preset."""
    hw = get_device("cpu")
    return {"L1d": _read_cache_bytes(1), "L2": _read_cache_bytes(2), "L3": _read_cache_bytes(3),
            "cores": hw.num_sms, "preset": hw}


def time_call(fn, *args, repeat: int = 5, warmup: bool = True, **kwargs) -> float:
    """Best (minimum) seconds of ``fn(*args, **kwargs)`` over `repeat` runs, after one untimed warm-up call
    (``warmup=False``: none; the first run, with cold caches or a compile, is then one of the `repeat`).

    The minimum, not the median: on a shared machine other processes only ever add time, so the fastest run is
    the best estimate of what the code itself needs.
    """
    if warmup:
        fn(*args, **kwargs)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(*args, **kwargs)
        times.append(time.perf_counter() - t0)
    return min(times)


def _inputs(n: int, d: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((n, d)).astype(np.float32) for _ in range(3)]


def cpu_time_memory(ns=(512, 1024, 2048), d: int = 64, repeat: int = 5) -> dict:
    """Measure flash (numba) and naive (numpy) here: best time of `repeat`, peak memory (tracemalloc), max error vs float64.

    Returns {"n": [...], "flash_s", "naive_s", "flash_peak", "naive_peak", "flash_predicted" (extra bytes from
    :func:`flashsim.cpu.flash_extra_bytes` + the output), "naive_predicted", "flash_err", "naive_err", "d",
    "time_label"}. Without numba: one line says so, and :func:`recorded_time_memory` is returned.
    """
    from tqdm.auto import tqdm

    why = missing("cpu")
    if why:
        recorded = recorded_time_memory(ns)
        print(f"{why} Shown instead: the measurements {recorded['source']}.")
        return recorded
    out = {k: [] for k in ("n", "flash_s", "naive_s", "flash_peak", "naive_peak", "flash_predicted",
                           "naive_predicted", "flash_err", "naive_err")}
    out.update(d=d, time_label=f"best time of {repeat} (s)")
    for n in tqdm(ns, desc="flash vs naive on the CPU", leave=False):
        q, k, v = _inputs(n, d)
        out["n"].append(n)
        out["flash_s"].append(time_call(cpu.flash_attention_cpu, q, k, v, repeat=repeat))
        out["naive_s"].append(time_call(naive_attention_numpy, q, k, v, repeat=repeat))
        out["flash_peak"].append(peak_memory_cpu(cpu.flash_attention_cpu, q, k, v, method="tracemalloc"))
        out["naive_peak"].append(peak_memory_cpu(naive_attention_numpy, q, k, v, method="tracemalloc"))
        out["flash_predicted"].append(flash_extra_bytes(n, d) + n * d * 4)
        out["naive_predicted"].append(naive_extra_bytes(n, d) + n * d * 4)
        if n <= 4096:
            ref = reference_attention(q, k, v)
            out["flash_err"].append(float(np.abs(cpu.flash_attention_cpu(q, k, v) - ref).max()))
            out["naive_err"].append(float(np.abs(naive_attention_numpy(q, k, v) - ref).max()))
    return out


def recorded_time_memory(ns=None) -> dict:
    """:func:`cpu_time_memory`'s measurement as recorded on a CPU: the median times of the speed record and the
    tracemalloc peaks of the peak-memory record, at the asked N where both have them (else at every N both have),
    with the same keys plus "source". The flash prediction is the extra bytes counted for the recording machine."""
    speed, peak = load_result("cpu_speed"), load_result("cpu_peak_memory")
    peaks = {r["N"]: r for r in peak["cpu"] if r["naive numpy"] is not None and r["flash (numba)"] is not None}
    rows = [r for r in speed["speed"] if r["N"] in peaks]
    rows = [r for r in rows if ns is not None and r["N"] in set(ns)] or rows
    out = {"n": [r["N"] for r in rows], "d": rows[0]["d"],
           "flash_s": [r["median_ms"]["flash (numba)"] * 1e-3 for r in rows],
           "naive_s": [r["median_ms"]["naive numpy"] * 1e-3 for r in rows],
           "flash_peak": [peaks[r["N"]]["flash (numba)"] for r in rows],
           "naive_peak": [peaks[r["N"]]["naive numpy"] for r in rows],
           "flash_predicted": [peaks[r["N"]]["flash_predicted_extra_bytes"] + peaks[r["N"]]["output_bytes"]
                               for r in rows],
           "naive_predicted": [naive_extra_bytes(r["N"], r["d"]) + peaks[r["N"]]["output_bytes"] for r in rows],
           "flash_err": [r["max_abs_error_vs_float64"]["flash (numba)"] for r in rows],
           "naive_err": [r["max_abs_error_vs_float64"]["naive numpy"] for r in rows],
           "time_label": "recorded median time (s)",
           "source": f"recorded on {speed['machine']['cpu_short']} (numba {speed['versions']['numba']}): "
                     f"{result_source('cpu_speed')}, {result_source('cpu_peak_memory')}"}
    return out


class CacheBlockDashboard(Dashboard):
    """block_r / block_c sliders for the CPU kernel: the step's working set against L1/L2/L3, and its time.

    ``current`` = {"block_r", "block_c", "working_set", "level" (the smallest cache it fits in), "time_s"}.
    Times are measured on first use of a block pair and kept, so moving back is instant and re-running a cell
    shows the same numbers; on the page, the sweeps one block_r step away are timed while the controls rest
    (:class:`flashsim.course.kit.dashboard.Memo`), so a move of block_r shows its curve at once. Without numba
    (said in one line) the times, caches, N and d are those of the block sweep recorded on a CPU (``recorded``: its
    source), and ``time_s`` is None at a pair it did not time.
    """

    BLOCK_RS = (16, 32, 64, 128, 256)
    plot = BlockCachePlot

    def __init__(self, n: int | None = None, d: int = 64, block_r: int = 64, block_c: int | None = None):
        why = missing("cpu")
        self.recorded = None
        if why:
            record = load_result("cpu_speed")
            self._record = record["block_sweep"]
            self.recorded = f"recorded on {record['machine']['cpu_short']}: {result_source('cpu_speed')}"
            print(f"{why} Shown instead: the block sweep {self.recorded}.")
            self.n, self.d = int(self._record["N"]), int(self._record["d"])
            self.caches = {"L1d": self._record["l1d_bytes"], "L2": self._record["l2_bytes"],
                           "L3": record["machine"].get("llc_bytes"), "cores": record["machine"]["cores"]}
            self.default = tuple(self._record["default_blocks"])
        else:
            self.n = int(n or pick(small=1024, full=4096))
            self.d = d
            self.caches = cpu_hierarchy()
            self.default = default_blocks(d)
            self.q, self.k, self.v = _inputs(self.n, d, seed=1)
        self._times = Memo(self._time_pair)
        self._sweeps: dict = {}
        self.block_r, self.block_c = int(block_r), int(block_c or self.default[1])
        self.current: dict = {}
        self.update()

    def controls(self):
        return {"block_r": slider("block_r", sorted({*self.BLOCK_RS, self.block_r})),
                "block_c": slider("block_c", sorted({*CPU_BLOCK_CS, self.block_c}))}

    def level(self, nbytes: int) -> str:
        for name in ("L1d", "L2", "L3"):
            size = self.caches[name]
            if size and nbytes <= size:
                return name
        return "DRAM"

    def _recorded_points(self, block_r: int) -> list:
        """The recorded sweep's points at block_r (at the record's first block_r where it has none)."""
        points = self._record["points"]
        return [p for p in points if p["block_r"] == block_r] or [p for p in points
                                                                  if p["block_r"] == points[0]["block_r"]]

    def time_for(self, block_r: int, block_c: int) -> float | None:
        """Best-of-3 seconds on ONE thread: the cache question is per core, and a second thread that shares the
        core with other work (Binder, a busy laptop) makes two-thread timings jump between levels. Three runs and
        no separate warm-up (the minimum leaves the cold first run out): a block_r's sweep times 20 pairs, 3 s at
        N=4096 on a 2-core CPU. Recorded: the record's median at that pair, or None."""
        key = (int(block_r), int(block_c))
        if self.recorded:
            return next((p["median_ms"] * 1e-3 for p in self._record["points"]
                         if (p["block_r"], p["block_c"]) == key), None)
        return self._times(*key)

    def _time_pair(self, block_r: int, block_c: int) -> float:
        """:meth:`time_for` measured (for :class:`Memo`: the same inputs every time, so the controls and the
        background thread agree whichever times a pair first)."""
        import numba                                               # lazy: numba only where the kernel runs
        threads = numba.get_num_threads()                          # per thread: the background's own
        numba.set_num_threads(1)
        try:
            return time_call(cpu.flash_attention_cpu, self.q, self.k, self.v, block_r=block_r, block_c=block_c,
                             repeat=3, warmup=False)
        finally:
            numba.set_num_threads(threads)

    def _prefetch(self) -> None:
        """On the page: time the sweeps one block_r step away while the controls rest, the larger block_r first,
        each from the shown block_c (the pair a move of block_r shows first)."""
        if self.recorded or not self._views:
            return
        brs = sorted(neighbours(sorted({*self.BLOCK_RS, self.block_r}), self.block_r), reverse=True)
        self._times.prefetch([(br, bc) for br in brs
                              for bc in sorted({*CPU_BLOCK_CS, self.block_c}, key=lambda c: c != self.block_c)])

    def show(self):
        box = super().show()
        self._prefetch()
        return box

    def apply(self, block_r: int | None = None, block_c: int | None = None) -> dict:
        br = int(block_r if block_r is not None else self.block_r)
        bc = int(block_c if block_c is not None else self.block_c)
        if br <= 0 or bc <= 0:
            raise FlashsimError(f"block_r={br}, block_c={bc} must be positive: e.g. block_r=64, block_c=256")
        self.block_r, self.block_c = br, bc
        ws = step_working_set_bytes(br, bc, self.d)
        self.current = {"block_r": br, "block_c": bc, "working_set": ws, "level": self.level(ws),
                        "time_s": self.time_for(br, bc)}
        self._prefetch()
        return self.current

    def sweep(self, block_cs=CPU_BLOCK_CS, block_r: int | None = None) -> dict:
        """Times and working sets over block_c (block_r fixed): {"block_c", "working_set", "time_s"}; kept per
        (block_r, block_cs), so the dashboard's figure only re-measures for a new block_r. Recorded: the record's
        block_c values at that block_r (its first block_r where it has none), whatever `block_cs` asks."""
        from tqdm.auto import tqdm
        br = int(block_r or self.block_r)
        if self.recorded:
            points = self._recorded_points(br)
            br = points[0]["block_r"]
            block_cs = tuple(p["block_c"] for p in points)
        key = (br, tuple(block_cs))
        if key not in self._sweeps:
            self._sweeps[key] = {
                "block_r": br, "block_c": list(block_cs),
                "working_set": [step_working_set_bytes(br, bc, self.d) for bc in block_cs],
                # over every block_r of the slider: the figure's working-set axis stays when block_r moves
                "working_set_range": (min(step_working_set_bytes(r, bc, self.d) for r in self.BLOCK_RS
                                          for bc in block_cs),
                                      max(step_working_set_bytes(r, bc, self.d) for r in self.BLOCK_RS
                                          for bc in block_cs)),
                "time_s": [self.time_for(br, bc) for bc in tqdm(block_cs, desc="block_c sweep", leave=False,
                                                                disable=bool(self.recorded))]}
            self._sweeps[key]["time_label"] = ("time (ms, recorded median)" if self.recorded
                                               else "time (ms, best of 3)")
        return self._sweeps[key]

    def readout(self) -> str:
        c = self.current
        time = "not timed in the record" if c["time_s"] is None else f"{c['time_s'] * 1e3:.1f} ms"
        return (f"N={self.n}, d={self.d}: {c['block_r']} x {c['block_c']} blocks, one step touches "
                f"{c['working_set'] / 1024:.0f} KiB (fits in {c['level']}), {time} "
                f"(default blocks {self.default[0]} x {self.default[1]})" + (", recorded" if self.recorded else ""))

    def plot_args(self, sweep: dict | None = None) -> dict:
        return {"sweep": sweep or self.sweep(), "caches": self.caches, "current": self.current,
                "title": self.readout()}

    def figure(self, sweep: dict | None = None):
        return self.plot(**self.plot_args(sweep)).fig
