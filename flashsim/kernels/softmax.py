"""Online softmax in Triton: one row-block reduction with a running max and a running sum (chapter 04).

One program per block of BLOCK_M rows of X (M, N). Pass 1 streams the row block in BLOCK_N-wide column tiles,
keeping per row a running max m and a running sum l, rescaled by exp(m_old - m_new) whenever the max grows:
that is the one-pass softmax statistic FlashAttention builds on. Pass 2 streams the tiles again and writes
P = exp(x - m) / l. It also writes the logsumexp m + log(l) (fp32, one per row).

Traffic: X is read twice (once per pass), P written once, LSE written once. ``causal=True`` masks element
(i, j) with j > i: column tiles wholly past the diagonal are skipped (neither loaded nor stored; P is 0 there);
diagonal tiles are loaded and stored whole, the mask applied in registers (whole-tile masks keep the GPU's
accesses full-width vectors).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from flashsim.kernels._common import check_blocks, check_flag, check_tensors, poison_like
from flashsim.errors import FlashsimError


@triton.jit
def _online_softmax_kernel(X, P, LSE, M, N, stride_xm, stride_xn, stride_pm, stride_pn,
                           CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)       # (BLOCK_M,)
    offs_n = tl.arange(0, BLOCK_N)                      # (BLOCK_N,)
    r_valid = rows < M
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)   # running max
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)                 # running sum of exp(x - m)
    if CAUSAL:
        hi = tl.minimum((pid + 1) * BLOCK_M, N)
    else:
        hi = N
    for start in range(0, hi, BLOCK_N):                 # pass 1: statistics
        cols = start + offs_n
        mask = r_valid[:, None] & (cols < N)[None, :]
        # reads X (pass 1): M*N elements (causal: the tiles on/below the diagonal)
        x = tl.load(X + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask,
                    other=float("-inf")).to(tl.float32)                      # (BLOCK_M, BLOCK_N)
        if CAUSAL:
            x = tl.where(rows[:, None] >= cols[None, :], x, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(x, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)              # rows with nothing seen yet
        l_i = l_i * tl.exp(m_i - m_safe) + tl.sum(tl.exp(x - m_safe[:, None]), 1)
        m_i = m_new
    m_fin = tl.where(m_i == float("-inf"), 0.0, m_i)
    l_i = tl.where(l_i > 0, l_i, 1.0)                  # padded rows saw nothing
    for start in range(0, hi, BLOCK_N):                 # pass 2: normalise and write
        cols = start + offs_n
        mask = r_valid[:, None] & (cols < N)[None, :]
        # reads X (pass 2): M*N elements (causal: the tiles on/below the diagonal)
        x = tl.load(X + rows[:, None] * stride_xm + cols[None, :] * stride_xn, mask=mask,
                    other=float("-inf")).to(tl.float32)
        if CAUSAL:
            x = tl.where(rows[:, None] >= cols[None, :], x, float("-inf"))
        p = tl.exp(x - m_fin[:, None]) / l_i[:, None]
        # writes P once: M*N elements (causal: the tiles on/below the diagonal)
        tl.store(P + rows[:, None] * stride_pm + cols[None, :] * stride_pn, p.to(P.dtype.element_ty), mask=mask)
    # writes LSE once: M fp32 elements
    tl.store(LSE + rows, m_fin + tl.log(l_i), mask=r_valid)


def online_softmax(x: torch.Tensor, causal: bool = False, block_m: int | None = None,
                   block_n: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Row softmax of x (M, N) by the online (running max, running sum) method (chapter 04).

    Returns (p, lse): p (M, N) in x's dtype, lse (M,) fp32. Causal: element (i, j > i) is masked; p is 0 there.
    """
    check_tensors(("x",), x, ndim=2)
    M, N = x.shape
    if min(M, N) < 1:
        raise FlashsimError(f"empty input of shape {tuple(x.shape)}")
    causal = check_flag("causal", causal)
    block_m, block_n = check_blocks("online_softmax", N, block_m, block_n)
    p = torch.zeros_like(x) if causal else poison_like(x)          # (M, N); causal: masked entries are 0
    lse = poison_like(x, (M,), torch.float32)
    _online_softmax_kernel[(triton.cdiv(M, block_m),)](x, p, lse, M, N, *x.stride(), *p.stride(),
                                                       CAUSAL=bool(causal), BLOCK_M=block_m, BLOCK_N=block_n)
    return p, lse
