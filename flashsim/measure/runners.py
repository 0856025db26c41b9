"""Run one of the course's kernels by its CLI name (``flashsim measure --kernel``) on fixed random inputs."""
from __future__ import annotations

from flashsim import kernels
from flashsim.errors import FlashsimError
from flashsim.measure.inputs import make_inputs
from flashsim.model.kernel_io import KERNELS


def kernel_runner(kernel: str, n: int, d: int, block_m: int, block_n: int, causal: bool = False, dtype="fp16",
                  batch: int = 1, heads: int = 1, block_k: int = 32, tma: bool = False):
    """A zero-argument callable that launches ``kernel`` once on fixed random inputs (prepared now).

    ``tma`` (flash_fwd, flash_bwd): load through tensor descriptors. Off by default: the kernel view models the
    pointer loads, which ncu's global-load counters see; TMA copies bypass those counters (same DRAM bytes)."""
    inputs = make_inputs(kernel, n, d, dtype, batch, heads)
    if kernel == "flash_fwd":
        q, k, v = inputs
        return lambda: kernels.flash_forward(q, k, v, causal=causal, block_m=block_m, block_n=block_n, tma=tma)
    if kernel == "flash_bwd":
        q, k, v, do = inputs
        o, lse = kernels.flash_forward(q, k, v, causal=causal, block_m=block_m, block_n=block_n)
        return lambda: kernels.flash_backward(q, k, v, o, lse, do, causal=causal, block_m=block_m, block_n=block_n,
                                        tma=tma)
    if kernel == "naive":
        q, k, v = inputs
        return lambda: kernels.naive_attention(q, k, v, causal=causal, block_m=block_m, block_n=block_n)
    if kernel == "tiled_matmul":
        a, b = inputs
        return lambda: kernels.tiled_matmul(a, b, block_m=block_m, block_n=block_n, block_k=block_k, causal=causal)
    if kernel == "online_softmax":
        (x,) = inputs
        return lambda: kernels.online_softmax(x, causal=causal, block_m=block_m, block_n=block_n)
    raise FlashsimError(f"unknown kernel {kernel!r}: use one of {list(KERNELS)}")


#: Triton kernel function names per CLI kernel (for ncu's --kernel-name filter) and launches per call.
KERNEL_FUNCTIONS = {
    "flash_fwd": ["_flash_fwd_kernel"],
    "flash_bwd": ["_bwd_preprocess", "_bwd_dkdv", "_bwd_dq"],
    "naive": ["_scores_kernel", "_softmax_kernel", "_pv_kernel"],
    "tiled_matmul": ["_matmul_kernel"],
    "online_softmax": ["_online_softmax_kernel"],
}
