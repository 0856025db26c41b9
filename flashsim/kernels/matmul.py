"""Tiled matrix multiply in Triton: the tiling idea on its own (chapter 03).

C = A B with A (M, K) and B (K, N). One program per (BLOCK_M × BLOCK_N) tile of C; it walks K in BLOCK_K
steps, loading a BLOCK_M × BLOCK_K tile of A and a BLOCK_K × BLOCK_N tile of B each step and accumulating in
fp32. Each element of A is therefore read once per column block of C (ceil(N / BLOCK_N) times), each element of
B once per row block (ceil(M / BLOCK_M) times), and C is written once: bigger tiles, less traffic.

``causal=True`` computes only the tiles of C on or below the diagonal, as for the scores Q Kᵀ of causal
attention: tiles wholly above the diagonal are skipped (they stay NaN); diagonal tiles are computed and stored
whole (whole-tile masks keep the GPU's stores full-width vectors).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from flashsim.errors import FlashsimError
from flashsim.kernels._common import check_block, check_blocks, check_flag, check_tensors, poison_like


@triton.jit
def _matmul_kernel(A, B, C, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                   CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    if CAUSAL:
        if pid_n * BLOCK_N > pid_m * BLOCK_M + BLOCK_M - 1:
            return                                      # tile wholly above the diagonal: skipped
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)   # (BLOCK_M,)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)   # (BLOCK_N,)
    offs_k = tl.arange(0, BLOCK_K)                      # (BLOCK_K,)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        ks = k0 + offs_k
        # reads A once per column block of C: M*K elements per column block
        a = tl.load(A + offs_m[:, None] * stride_am + ks[None, :] * stride_ak,
                    mask=(offs_m < M)[:, None] & (ks < K)[None, :], other=0.0)   # (BLOCK_M, BLOCK_K)
        # reads B once per row block of C: K*N elements per row block
        b = tl.load(B + ks[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=(ks < K)[:, None] & (offs_n < N)[None, :], other=0.0)   # (BLOCK_K, BLOCK_N)
        acc += tl.dot(a, b)
    mask = (offs_m < M)[:, None] & (offs_n < N)[None, :]
    # writes C once: M*N elements (causal: the tiles on/below the diagonal)
    tl.store(C + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc.to(C.dtype.element_ty), mask=mask)


def tiled_matmul(a: torch.Tensor, b: torch.Tensor, block_m: int | None = None, block_n: int | None = None,
                 block_k: int | None = None, causal: bool = False) -> torch.Tensor:
    """C = A @ B, tiled (chapter 03). a: (M, K), b: (K, N); c: (M, N) in a's dtype (fp32 accumulation).

    With ``causal=True`` only C's tiles on/below the diagonal are computed; tiles above stay NaN.
    """
    check_tensors(("a", "b"), a, b, ndim=2)
    M, K = a.shape
    K2, N = b.shape
    if K != K2:
        raise FlashsimError(f"inner dims differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}; a @ b needs "
                            "a.shape[1] == b.shape[0]")
    if min(M, N, K) < 1:
        raise FlashsimError(f"empty matmul {tuple(a.shape)} @ {tuple(b.shape)}")
    causal = check_flag("causal", causal)
    block_m, block_n = check_blocks("tiled_matmul", K, block_m, block_n)
    block_k = check_block("block_k", 32 if block_k is None else block_k)
    c = poison_like(a, (M, N))
    _matmul_kernel[(triton.cdiv(M, block_m), triton.cdiv(N, block_n))](
        a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(),
        CAUSAL=bool(causal), BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k)
    return c
