"""Chapter 06 dashboards: O(N) memory — peak memory of naive vs flash attention measured as N grows, and how long a
context fits in a GPU's memory under each.

:func:`measure_peak_memory` measures (``flashsim.measure.peak_memory``: tracemalloc on a CPU, torch's CUDA allocator on a
GPU); :func:`attention_memory_bytes` is the model; :class:`ContextMemoryDashboard` turns the model into "the longest
context that fits". ``ContextMemoryDashboard().update(device="a100", batch_heads=64)`` works without a kernel.
"""
from __future__ import annotations

import math

import numpy as np

from flashsim.model.hardware import HBM_CAPACITY_BYTES  # device memory of the presets (re-exported: chapter 06 introduces it)
from flashsim.course.ch00.dashboards import widget_or_figure

__all__ = ["HBM_CAPACITY_BYTES", "attention_memory_bytes", "max_context_for", "measure_peak_memory",
           "ContextMemoryDashboard"]

GB = 1e9


def attention_memory_bytes(algo: str, n: int, d: int, batch_heads: int = 1, elem_bytes: int = 2) -> int:
    """Bytes one attention layer holds in device memory at its peak (the model of chapter 06).

    Both hold Q, K, V and O: 4·N·d·b per head. Standard attention (Algorithm 0) also materializes S and P:
    + 2·N²·b per head. FlashAttention only adds the logsumexp L (N fp32 numbers per head, kept for the backward).
    """
    per_head = 4 * n * d * elem_bytes
    if algo in ("naive", "standard"):
        per_head += 2 * n * n * elem_bytes
    elif algo in ("flash", "flash1", "flash2"):
        per_head += 4 * n
    else:
        raise ValueError(f"algo={algo!r}: use 'naive' or 'flash'")
    return int(batch_heads * per_head)


def max_context_for(capacity_bytes: float, algo: str, d: int, batch_heads: int = 1, elem_bytes: int = 2) -> int:
    """Largest N with attention_memory_bytes(algo, N, ...) <= capacity_bytes (solves the quadratic, then steps).

    Introduced in chapter 06.
    """
    c = capacity_bytes / batch_heads
    if algo in ("naive", "standard"):
        a, b = 2 * elem_bytes, 4 * d * elem_bytes
        n = int((-b + math.sqrt(b * b + 4 * a * c)) / (2 * a))
    else:
        n = int(c // (4 * d * elem_bytes + 4))
    while attention_memory_bytes(algo, n + 1, d, batch_heads, elem_bytes) <= capacity_bytes:
        n += 1
    while n > 0 and attention_memory_bytes(algo, n, d, batch_heads, elem_bytes) > capacity_bytes:
        n -= 1
    return n


def measure_peak_memory(ns=(512, 1024, 2048, 4096), d: int = 64, seed: int = 0) -> dict:
    """Peak memory growth of naive vs flash attention forward on one head, measured at each N (tqdm bar).

    On a CUDA GPU: torch's plain softmax(QKᵀ/√d)V against the course's Triton flash_forward, fp16, with
    :func:`flashsim.measure.peak_memory.peak_memory_gpu`. Otherwise: :func:`flashsim.cpu.naive_attention_numpy` against
    :func:`flashsim.cpu.flash_attention_cpu` (numba), float32, with :func:`flashsim.measure.peak_memory.peak_memory_cpu`
    (tracemalloc). Returns {"backend", "ns", "naive", "flash", "naive_model", "flash_model"} (bytes).

    Introduced in chapter 06.
    """
    from tqdm.auto import tqdm

    import torch
    gpu = torch.cuda.is_available()
    out = {"ns": list(ns), "naive": [], "flash": [], "naive_model": [], "flash_model": []}
    rng = np.random.default_rng(seed)
    if gpu:
        from flashsim.kernels import flash_forward
        from flashsim.measure.peak_memory import peak_memory_gpu

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
            # model: S and P (fp16) exist together while softmax runs (O comes after S is freed); flash: O + L
            out["naive_model"].append(2 * n * n * 2)
            out["flash_model"].append(n * d * 2 + 4 * n)
            del q, k, v
    else:
        from flashsim.cpu import flash_attention_cpu, flash_extra_bytes, naive_attention_numpy, naive_extra_bytes
        from flashsim.measure.peak_memory import peak_memory_cpu

        out["backend"] = "CPU, float32, tracemalloc (numpy naive vs numba flash)"
        warm = rng.standard_normal((64, d), dtype=np.float32)
        flash_attention_cpu(warm, warm, warm)  # compile once, outside the measurement
        for n in tqdm(list(ns), desc="peak memory (CPU)", leave=False):
            q, k, v = (rng.standard_normal((n, d), dtype=np.float32) for _ in range(3))
            out["naive"].append(peak_memory_cpu(naive_attention_numpy, q, k, v))
            out["flash"].append(peak_memory_cpu(flash_attention_cpu, q, k, v))
            out["naive_model"].append(naive_extra_bytes(n, d) + 4 * n * d)   # S (in place) + O
            out["flash_model"].append(flash_extra_bytes(n, d) + 4 * n * d)   # O(N·d) workspaces + O
    return out


class ContextMemoryDashboard:
    """How long a context fits in one GPU's memory, per attention layer, standard vs FlashAttention.

    state after ``update``: ``max_n`` {"naive": N, "flash": N}, ``capacity_bytes``; ``figure()`` draws memory vs N.

    Introduced in chapter 06.
    """

    def __init__(self, device: str = "h200", batch_heads: int = 32, d: int = 128, elem_bytes: int = 2):
        self.device, self.batch_heads, self.d, self.elem_bytes = device, batch_heads, d, elem_bytes
        self.update()

    def update(self, device: str | None = None, batch_heads: int | None = None, d: int | None = None) -> dict:
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

    def figure(self):
        from flashsim.course.ch06.figures import plot_context_memory
        ns = np.unique(np.logspace(9, 24, 61, base=2).astype(np.int64))
        curves = {a: [attention_memory_bytes(a, int(n), self.d, self.batch_heads, self.elem_bytes) for n in ns]
                  for a in ("naive", "flash")}
        return plot_context_memory(ns, curves, self.capacity_bytes, self.max_n,
                                   title=f"one attention layer on {self.device}: heads×batch = {self.batch_heads}, "
                                         f"d={self.d}")

    @widget_or_figure
    def show(self):
        import ipywidgets as W
        from flashsim.course.ch05.dashboards import png_image_widget, set_png
        dev = W.Dropdown(options=sorted(HBM_CAPACITY_BYTES), value=self.device, description="device")
        bh = W.SelectionSlider(options=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512], value=self.batch_heads,
                               description="heads×batch", continuous_update=False,
                               style={"description_width": "initial"})
        d = W.SelectionSlider(options=[64, 128, 256], value=self.d, description="d", continuous_update=False)
        text = W.HTML(self.readout())
        img = png_image_widget(self.figure(), "flashsim-context-memory-plot")

        def redraw(_):
            self.update(device=dev.value, batch_heads=bh.value, d=d.value)
            text.value = self.readout()
            set_png(img, self.figure())

        for w in (dev, bh, d):
            w.observe(redraw, names="value")
        self._widgets = {"device": dev, "batch_heads": bh, "d": d, "readout": text, "image": img}
        return W.VBox([W.HBox([dev, bh, d]), text, img])
