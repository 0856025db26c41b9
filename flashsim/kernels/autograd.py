"""``attention``: FlashAttention as a torch.autograd.Function (chapters 05 and 07).

Forward runs :func:`flash_forward` and saves Q, K, V, O and the logsumexp (not P); backward runs
:func:`flash_backward`, which recomputes P tile by tile.
"""
from __future__ import annotations

import torch

from flashsim.errors import FlashsimError
from flashsim.kernels.flash_bwd import DQ_MODES, flash_backward
from flashsim.kernels.flash_fwd import flash_forward


class FlashAttention(torch.autograd.Function):
    """autograd over the Triton FlashAttention forward and backward kernels."""

    @staticmethod
    def forward(ctx, q, k, v, causal=False, sm_scale=None, block_m=None, block_n=None, dq_mode="separate"):
        o, lse = flash_forward(q, k, v, causal=causal, sm_scale=sm_scale, block_m=block_m, block_n=block_n)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.sm_scale, ctx.dq_mode = causal, sm_scale, dq_mode
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        kw = {} if ctx.dq_mode == "separate" else {"dq_mode": ctx.dq_mode}
        dq, dk, dv = flash_backward(q, k, v, o, lse, do, causal=ctx.causal, sm_scale=ctx.sm_scale, **kw)
        return dq, dk, dv, None, None, None, None, None


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, sm_scale=None,
              block_m: int | None = None, block_n: int | None = None, dq_mode: str = "separate") -> torch.Tensor:
    """softmax(Q Kᵀ · sm_scale) V with autograd, on the FlashAttention Triton kernels. q, k, v: (B, H, N, d).

    ``dq_mode``: how the backward pass computes dQ, "separate" (default) or "atomic" (see :func:`flash_backward`).
    """
    if dq_mode not in DQ_MODES:
        raise FlashsimError(f"dq_mode={dq_mode!r}: use one of {list(DQ_MODES)}")
    return FlashAttention.apply(q, k, v, causal, sm_scale, block_m, block_n, dq_mode)
