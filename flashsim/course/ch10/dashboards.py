"""Chapter 10 dashboards and measurements: the CPU view, where the caches play SRAM.

* :func:`cpu_hierarchy`: this machine's caches (sysfs), next to a GPU preset's levels;
* :func:`cpu_time_memory`: :func:`flashsim.cpu.flash_attention_cpu` (numba, blocked, float32) against
  :func:`flashsim.cpu.naive_attention_numpy`, time and peak memory *measured here* over N;
* :class:`CacheBlockDashboard`: block sizes against cache sizes: the working set of one step
  (:func:`flashsim.solutions.ch10.step_working_set_bytes`) and the measured time, with ``update(block_r=...,
  block_c=...)`` and ``current`` testable without Jupyter.
"""
from __future__ import annotations

import time

import numpy as np

from flashsim.course.ch00.dashboards import widget_or_figure

__all__ = ["cpu_hierarchy", "cpu_time_memory", "CacheBlockDashboard", "time_call", "CPU_BLOCK_CS"]

#: block_c values of the dashboard (multiples of 64, one packed panel of Kᵀ)
# block_c values of the sweep and slider: every 64 up to 1024, then past a typical per-core L2 (1–2 MiB)
CPU_BLOCK_CS = tuple(range(64, 1024 + 1, 64)) + (1536, 2048, 3072, 4096)


def cpu_hierarchy() -> dict:
    """{"L1d", "L2", "L3"} bytes of this CPU (sysfs; None where unknown), cores, and the CPU preset."""
    from flashsim.model.hardware import _read_cache_bytes, get_device
    hw = get_device("cpu")
    return {"L1d": _read_cache_bytes(1), "L2": _read_cache_bytes(2), "L3": _read_cache_bytes(3),
            "cores": hw.num_sms, "preset": hw}


def time_call(fn, *args, repeat: int = 5, **kwargs) -> float:
    """Best (minimum) seconds of ``fn(*args, **kwargs)`` over `repeat` runs, after one untimed warm-up call.

    The minimum, not the median: on a shared machine other processes only ever add time, so the fastest run is
    the best estimate of what the code itself needs.
    """
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
    :func:`flashsim.cpu.flash_extra_bytes` + the output), "naive_predicted", "flash_err", "naive_err"}.
    """
    from tqdm.auto import tqdm

    from flashsim.cpu import flash_attention_cpu, flash_extra_bytes, naive_attention_numpy, naive_extra_bytes
    from flashsim.course.ch05.checks import reference_attention
    from flashsim.measure.peak_memory import peak_memory_cpu
    out = {k: [] for k in ("n", "flash_s", "naive_s", "flash_peak", "naive_peak", "flash_predicted",
                           "naive_predicted", "flash_err", "naive_err")}
    out["d"] = d
    for n in tqdm(ns, desc="flash vs naive on the CPU", leave=False):
        q, k, v = _inputs(n, d)
        out["n"].append(n)
        out["flash_s"].append(time_call(flash_attention_cpu, q, k, v, repeat=repeat))
        out["naive_s"].append(time_call(naive_attention_numpy, q, k, v, repeat=repeat))
        out["flash_peak"].append(peak_memory_cpu(flash_attention_cpu, q, k, v, method="tracemalloc"))
        out["naive_peak"].append(peak_memory_cpu(naive_attention_numpy, q, k, v, method="tracemalloc"))
        out["flash_predicted"].append(flash_extra_bytes(n, d) + n * d * 4)
        out["naive_predicted"].append(naive_extra_bytes(n, d) + n * d * 4)
        if n <= 4096:
            ref = reference_attention(q, k, v)
            out["flash_err"].append(float(np.abs(flash_attention_cpu(q, k, v) - ref).max()))
            out["naive_err"].append(float(np.abs(naive_attention_numpy(q, k, v) - ref).max()))
    return out


class CacheBlockDashboard:
    """block_r / block_c sliders for the CPU kernel: the step's working set against L1/L2/L3, and its time.

    ``current`` = {"block_r", "block_c", "working_set", "level" (the smallest cache it fits in), "time_s"}.
    Times are measured on first use of a block pair and kept, so moving back is instant and re-running a cell
    shows the same numbers.
    """

    def __init__(self, n: int | None = None, d: int = 64, block_r: int = 64, block_c: int | None = None):
        from flashsim.course import pick
        from flashsim.cpu import default_blocks
        self.n = int(n or pick(small=1024, full=4096))
        self.d = d
        self.caches = cpu_hierarchy()
        self.default = default_blocks(d)
        self.q, self.k, self.v = _inputs(self.n, d, seed=1)
        self._times: dict = {}
        self.current: dict = {}
        self.update(block_r=block_r, block_c=block_c or self.default[1])

    def level(self, nbytes: int) -> str:
        for name in ("L1d", "L2", "L3"):
            size = self.caches[name]
            if size and nbytes <= size:
                return name
        return "DRAM"

    def time_for(self, block_r: int, block_c: int) -> float:
        """Best-of-5 seconds on ONE thread: the cache question is per core, and a second thread that shares the
        core with other work (Binder, a busy laptop) makes two-thread timings jump between levels."""
        key = (int(block_r), int(block_c))
        if key not in self._times:
            import numba

            from flashsim.cpu import flash_attention_cpu
            threads = numba.get_num_threads()
            numba.set_num_threads(1)
            try:
                self._times[key] = time_call(flash_attention_cpu, self.q, self.k, self.v, block_r=key[0],
                                             block_c=key[1], repeat=5)
            finally:
                numba.set_num_threads(threads)
        return self._times[key]

    def update(self, block_r: int | None = None, block_c: int | None = None) -> dict:
        from flashsim.solutions.ch10 import step_working_set_bytes
        br = int(block_r if block_r is not None else self.current["block_r"])
        bc = int(block_c if block_c is not None else self.current["block_c"])
        if br <= 0 or bc <= 0:
            from flashsim.errors import FlashsimError
            raise FlashsimError(f"block_r={br}, block_c={bc} must be positive: e.g. block_r=64, block_c=256")
        ws = step_working_set_bytes(br, bc, self.d)
        self.current = {"block_r": br, "block_c": bc, "working_set": ws, "level": self.level(ws),
                        "time_s": self.time_for(br, bc)}
        return self.current

    def sweep(self, block_cs=CPU_BLOCK_CS, block_r: int | None = None) -> dict:
        """Times and working sets over block_c (block_r fixed): {"block_c", "working_set", "time_s"}."""
        from tqdm.auto import tqdm

        from flashsim.solutions.ch10 import step_working_set_bytes
        br = int(block_r or self.current["block_r"])
        return {"block_r": br, "block_c": list(block_cs),
                "working_set": [step_working_set_bytes(br, bc, self.d) for bc in block_cs],
                "time_s": [self.time_for(br, bc) for bc in tqdm(block_cs, desc="block_c sweep", leave=False)]}

    def readout(self) -> str:
        c = self.current
        return (f"N={self.n}, d={self.d}: {c['block_r']} x {c['block_c']} blocks, one step touches "
                f"{c['working_set'] / 1024:.0f} KiB (fits in {c['level']}), {c['time_s'] * 1e3:.1f} ms "
                f"(default blocks {self.default[0]} x {self.default[1]})")

    def figure(self, sweep: dict | None = None):
        from flashsim.course.ch10.figures import plot_block_vs_cache
        return plot_block_vs_cache(sweep or self.sweep(), self.caches, current=self.current, title=self.readout())

    @widget_or_figure
    def show(self):
        import ipywidgets as W

        from flashsim.course.ch05.dashboards import png_image_widget, set_png
        br = W.SelectionSlider(options=[16, 32, 64, 128, 256], value=self.current["block_r"], description="block_r",
                               continuous_update=False)
        bc = W.SelectionSlider(options=list(CPU_BLOCK_CS), value=self.current["block_c"], description="block_c",
                               continuous_update=False)
        readout = W.HTML(self.readout())
        img = png_image_widget(self.figure())

        def redraw(_=None):
            self.update(block_r=br.value, block_c=bc.value)
            readout.value = self.readout()
            set_png(img, self.figure())

        br.observe(redraw, names="value")
        bc.observe(redraw, names="value")
        return W.VBox([W.HBox([br, bc]), readout, img])
