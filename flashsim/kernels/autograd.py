"""``attention``: FlashAttention as a torch.autograd.Function (chapters 05 and 07).

Forward runs :func:`flash_forward` and saves Q, K, V, O and the logsumexp (not P); backward runs
:func:`flash_backward`, which recomputes P tile by tile, with the same ``block_m``/``block_n`` (and ``gluon``
choice) as the forward pass (so the bytes both passes move are the ones :func:`flashsim.model.kernel_io.kernel_io`
predicts for them).
"""
from __future__ import annotations

import torch

from flashsim.kernels.flash_bwd import flash_backward
from flashsim.kernels.flash_fwd import flash_forward


class FlashAttention(torch.autograd.Function):
    """autograd over the FlashAttention forward and backward kernels (Triton, or Gluon on Hopper)."""

    @staticmethod
    def forward(ctx, q, k, v, causal=False, sm_scale=None, block_m=None, block_n=None, gluon=None):
        o, lse = flash_forward(q, k, v, causal=causal, sm_scale=sm_scale, block_m=block_m, block_n=block_n,
                               gluon=gluon)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.sm_scale, ctx.block_m, ctx.block_n, ctx.gluon = causal, sm_scale, block_m, block_n, gluon
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = flash_backward(q, k, v, o, lse, do, causal=ctx.causal, sm_scale=ctx.sm_scale,
                                    block_m=ctx.block_m, block_n=ctx.block_n, gluon=ctx.gluon)
        return dq, dk, dv, None, None, None, None, None


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, sm_scale=None,
              block_m: int | None = None, block_n: int | None = None, gluon: bool | None = None) -> torch.Tensor:
    """softmax(Q Kᵀ · sm_scale) V with autograd, on the FlashAttention kernels. q, k, v: (B, H, N, d).

    ``block_m`` (Q rows per tile) and ``block_n`` (K/V rows per tile) hold for the forward and the backward pass;
    None = each kernel's default (:func:`flashsim.kernels.default_blocks`, tuned configurations on Hopper).
    ``gluon`` holds for both passes, as :func:`flash_forward` and :func:`flash_backward` take it: None = each
    pass's default (on Hopper: the Gluon forward, the Triton backward), True = the Gluon kernels (Hopper only),
    False = the Triton kernels of chapters 05-12.
    """
    return FlashAttention.apply(q, k, v, causal, sm_scale, block_m, block_n, gluon)
