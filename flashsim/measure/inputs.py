"""Random inputs for the course's kernels, shaped as :mod:`flashsim.model.kernel_io` describes them."""
from __future__ import annotations

from flashsim.errors import FlashsimError
from flashsim.kernels.runtime import INSTALL_FIX, interpreting
from flashsim.model.dtypes import canonical_dtype
from flashsim.model.kernel_io import KERNELS


def require_torch():
    """torch, or a FlashsimError naming the install command (the base package has no torch)."""
    try:
        import torch                      # lazily: torch is an optional dependency
    except ImportError as exc:
        raise FlashsimError(f"measuring a kernel needs torch and triton ({exc}): {INSTALL_FIX}") from exc
    return torch


def make_inputs(kernel: str, n: int, d: int, dtype="fp16", batch: int = 1, heads: int = 1, device=None, seed=0):
    """Random (never zero) inputs for ``kernel`` as :mod:`flashsim.model.kernel_io` describes its shapes."""
    torch = require_torch()
    tdt = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[canonical_dtype(dtype)]
    device = device or ("cpu" if interpreting() else "cuda")
    g = torch.Generator(device="cpu").manual_seed(seed)

    def rnd(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float32).to(device=device, dtype=tdt)

    if kernel in ("flash_fwd", "flash_bwd", "naive"):
        return [rnd(batch, heads, n, d) for _ in range(3)] + ([rnd(batch, heads, n, d)] if kernel == "flash_bwd"
                                                              else [])
    if kernel == "tiled_matmul":
        return [rnd(n, d), rnd(d, n)]
    if kernel == "online_softmax":
        return [rnd(n, n)]
    raise FlashsimError(f"unknown kernel {kernel!r}: use one of {list(KERNELS)}")
