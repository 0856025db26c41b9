"""Chapter 06 dashboards: O(N) memory — peak memory of naive vs flash attention measured as N grows, and how long a
context fits in a GPU's memory under each.

:func:`measure_peak_memory` measures (``flashsim.measure.peak_memory``: tracemalloc on a CPU, torch's CUDA allocator on a
GPU); :func:`attention_memory_bytes` is the model; :class:`ContextMemoryDashboard` turns the model into "the longest
context that fits". ``ContextMemoryDashboard().update(device="a100", batch_heads=64)`` works without a kernel.
"""
from __future__ import annotations

import math

import numpy as np

from flashsim import cpu, kernels   # their kernels load on first use (numba, triton): importing them is cheap
from flashsim.course.ch06.figures import ContextMemoryPlot, context_memory_args
from flashsim.course.kit.dashboard import Dashboard, choice, slider
from flashsim.course.kit.optional import missing
from flashsim.course.kit.results import load_result, result_source
from flashsim.model.attention.memory_model import attention_memory_bytes, max_context_for
from flashsim.measure.peak_memory import peak_memory_cpu, peak_memory_gpu
from flashsim.model.hardware import HBM_CAPACITY_BYTES  # device memory of the presets (re-exported: chapter 06 introduces it)

__all__ = ["HBM_CAPACITY_BYTES", "attention_memory_bytes", "max_context_for", "measure_peak_memory",
           "recorded_peak_memory", "peak_growth_model", "ContextMemoryDashboard"]

GB = 1e9


def peak_growth_model(algo: str, n: int, d: int, elem_bytes: int, score_matrices: int = 2) -> int:
    """The memory model's peak (:func:`~flashsim.model.attention.memory_model.attention_memory_bytes`) minus the
    inputs Q, K, V, which exist before a measurement starts: what ``measure_peak_memory`` should see grow.

    Introduced in chapter 06.
    """
    return attention_memory_bytes(algo, n, d, 1, elem_bytes, score_matrices=score_matrices) - 3 * n * d * elem_bytes


def measure_peak_memory(ns=(512, 1024, 2048, 4096), d: int = 64, seed: int = 0) -> dict:
    """Peak memory growth of naive vs flash attention forward on one head, measured at each N (tqdm bar).

    On a CUDA GPU: torch's plain softmax(QKᵀ/√d)V against the course's Triton flash_forward, fp16, with
    :func:`flashsim.measure.peak_memory.peak_memory_gpu`. Otherwise: :func:`flashsim.cpu.naive_attention_numpy` against
    :func:`flashsim.cpu.flash_attention_cpu` (numba), float32, with :func:`flashsim.measure.peak_memory.peak_memory_cpu`
    (tracemalloc). Returns {"backend", "ns", "naive", "flash", "naive_model", "flash_model"} (bytes). Without a GPU
    and without numba: one line says so, and the same measurement recorded on a CPU is returned
    (:func:`recorded_peak_memory`).

    Introduced in chapter 06.
    """
    from tqdm.auto import tqdm

    gpu = False
    if not missing("kernels"):
        import torch                                    # lazy: torch only where the kernels run
        gpu = torch.cuda.is_available()
    why = None if gpu else missing("cpu")
    if why:
        print(f"{why} Shown instead: the measurement recorded on a CPU.")
        return recorded_peak_memory(ns)
    out = {"ns": list(ns), "naive": [], "flash": [], "naive_model": [], "flash_model": []}
    rng = np.random.default_rng(seed)
    if gpu:
        flash_forward = kernels.flash_forward
        def naive(q, k, v):
            return torch.softmax((q @ k.transpose(-1, -2)) / math.sqrt(d), dim=-1) @ v

        out["backend"] = f"GPU ({torch.cuda.get_device_name()}), fp16, torch.cuda.max_memory_allocated"
        warm = torch.randn(1, 1, 256, d, device="cuda", dtype=torch.float16)
        naive(warm, warm, warm)        # cuBLAS workspace and kernel compilation, outside the measurement
        flash_forward(warm, warm, warm)
        for n in tqdm(list(ns), desc="peak memory (GPU)", leave=False):
            q, k, v = (torch.randn(1, 1, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
            out["naive"].append(peak_memory_gpu(naive, q, k, v))
            out["flash"].append(peak_memory_gpu(flash_forward, q, k, v))
            # the memory model: S and P (fp16) and O; flash: O and the logsumexp L
            out["naive_model"].append(peak_growth_model("naive", n, d, 2))
            out["flash_model"].append(peak_growth_model("flash", n, d, 2))
            del q, k, v
    else:
        flash_attention_cpu, naive_attention_numpy = cpu.flash_attention_cpu, cpu.naive_attention_numpy

        out["backend"] = "CPU, float32, tracemalloc (numpy naive vs numba flash)"
        warm = rng.standard_normal((64, d), dtype=np.float32)
        flash_attention_cpu(warm, warm, warm)  # compile once, outside the measurement
        for n in tqdm(list(ns), desc="peak memory (CPU)", leave=False):
            q, k, v = (rng.standard_normal((n, d), dtype=np.float32) for _ in range(3))
            out["naive"].append(peak_memory_cpu(naive_attention_numpy, q, k, v))
            out["flash"].append(peak_memory_cpu(flash_attention_cpu, q, k, v))
            # numpy overwrites S with P: one float32 N×N matrix, and O
            out["naive_model"].append(peak_growth_model("naive", n, d, 4, score_matrices=1))
            # the numba kernel's own O(N·d) workspaces (counted from its array shapes), and O
            out["flash_model"].append(cpu.flash_extra_bytes(n, d) + 4 * n * d)
    return out


def recorded_peak_memory(ns=None) -> dict:
    """:func:`measure_peak_memory`'s CPU measurement as recorded (numpy naive against the numba flash kernel,
    float32, tracemalloc), at the asked N where it has them (else at every N it has both): the same keys, the model
    being the flash kernel's extra bytes as counted for the recording machine (its thread count) plus the output.

    Introduced in chapter 06.
    """
    record = load_result("cpu_peak_memory")
    rows = [r for r in record["cpu"] if r["naive numpy"] is not None and r["flash (numba)"] is not None]
    asked = [r for r in rows if ns is not None and r["N"] in set(ns)]
    rows = asked or rows
    out = {"backend": f"recorded on a CPU ({record['machine']['cores']} cores, numba {record['versions']['numba']}), "
                      f"float32, tracemalloc (numpy naive vs numba flash): {result_source('cpu_peak_memory')}",
           "ns": [r["N"] for r in rows], "naive": [r["naive numpy"] for r in rows],
           "flash": [r["flash (numba)"] for r in rows], "recorded": True}
    # numpy overwrites S with P: one float32 N×N matrix, and O; flash: its O(N·d) workspaces, and O
    out["naive_model"] = [peak_growth_model("naive", r["N"], r["d"], 4, score_matrices=1) for r in rows]
    out["flash_model"] = [r["flash_predicted_extra_bytes"] + r["output_bytes"] for r in rows]
    return out


class ContextMemoryDashboard(Dashboard):
    """How long a context fits in one GPU's memory, per attention layer, standard vs FlashAttention.

    state after ``update``: ``max_n`` {"naive": N, "flash": N}, ``capacity_bytes``; ``figure()`` draws memory vs N.

    Introduced in chapter 06.
    """

    plot = ContextMemoryPlot
    figure_class = "flashsim-context-memory-plot"
    BATCH_HEADS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)

    def __init__(self, device: str = "h200", batch_heads: int = 32, d: int = 128, elem_bytes: int = 2):
        self.device, self.batch_heads, self.d, self.elem_bytes = device, batch_heads, d, elem_bytes
        self.update()

    def controls(self):
        return {"device": choice("device", sorted(HBM_CAPACITY_BYTES)),
                "batch_heads": slider("heads × batch", self.BATCH_HEADS), "d": slider("d", (64, 128, 256))}

    def apply(self, device: str | None = None, batch_heads: int | None = None, d: int | None = None) -> dict:
        self.device = device or self.device
        if self.device not in HBM_CAPACITY_BYTES:
            raise ValueError(f"device={self.device!r}: use one of {sorted(HBM_CAPACITY_BYTES)}")
        self.batch_heads = int(batch_heads or self.batch_heads)
        self.d = int(d or self.d)
        self.capacity_bytes = HBM_CAPACITY_BYTES[self.device]
        self.max_n = {a: max_context_for(self.capacity_bytes, a, self.d, self.batch_heads, self.elem_bytes)
                      for a in ("naive", "flash")}
        return self.max_n

    def readout(self) -> str:
        return (f"{self.device} ({self.capacity_bytes / GB:.0f} GB), heads × batch = {self.batch_heads}, d={self.d}, "
                f"{8 * self.elem_bytes}-bit: standard attention fits N ≤ {self.max_n['naive']:,}; "
                f"FlashAttention N ≤ {self.max_n['flash']:,} "
                f"({self.max_n['flash'] / max(self.max_n['naive'], 1):,.0f}× longer)")

    def plot_args(self) -> dict:
        return context_memory_args(self.device, self.batch_heads, self.d, self.elem_bytes)
