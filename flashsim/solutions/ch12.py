"""Chapter 12 solution: the FlashAttention forward inner-loop body, in Triton.

:func:`flash_inner` is the reference answer for :func:`flashsim.exercises.check_flash_kernel`; the template that
calls it once per K/V tile is :func:`flashsim.course.ch12.template.flash_forward_template`. Its loads, masks and
update are those of :func:`flashsim.kernels.flash_forward`'s loop, so it moves exactly the bytes
``flashsim.model.kernel_io.kernel_io("flash_fwd", ...)`` predicts.
"""
from __future__ import annotations

from flashsim.kernels.runtime import select_backend

select_backend()   # GPU or interpreter, decided before triton is imported

import triton  # noqa: E402
import triton.language as tl  # noqa: E402

__all__ = ["flash_inner", "kernel_kv_bytes"]

#: exercise id -> the functions that solve it (what flashsim.exercises.reveal shows)
SOLUTIONS = {"12.1": ("flash_inner",), "12.2": ("kernel_kv_bytes",)}


@triton.jit
def flash_inner(q, m_i, l_i, acc, k_base, v_base, stride_n, start_n, offs_m, offs_n, offs_d, N, D, qk_scale,
                CAUSAL: tl.constexpr):
    """One K/V tile of the FA2 forward loop: load K_j, V_j; S = q K_jᵀ; online-softmax update of (m, l, acc)."""
    cols = start_n + offs_n                                      # (BLOCK_N,) key rows of this tile
    n_valid = cols < N
    kv_mask = n_valid[:, None] & (offs_d[None, :] < D)           # (BLOCK_N, BLOCK_D)
    k = tl.load(k_base + cols[:, None] * stride_n + offs_d[None, :], mask=kv_mask, other=0.0)
    s = tl.dot(q, tl.trans(k)) * qk_scale                        # (BLOCK_M, BLOCK_N), log2 units
    keep = n_valid[None, :]                                      # keys past N do not exist
    if CAUSAL:
        keep = keep & (offs_m[:, None] >= cols[None, :])         # keys after the query are masked
    s = tl.where(keep, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))                        # (BLOCK_M,) new running max
    p = tl.math.exp2(s - m_new[:, None])                         # (BLOCK_M, BLOCK_N)
    alpha = tl.math.exp2(m_i - m_new)                            # rescale what was summed under the old max
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    v = tl.load(v_base + cols[:, None] * stride_n + offs_d[None, :], mask=kv_mask, other=0.0)
    acc += tl.dot(p.to(v.dtype), v)
    return m_new, l_i, acc


def kernel_kv_bytes(n: int, d: int, block_m: int, block_n: int, causal: bool, elem_bytes: int) -> int:
    """Exercise 12.2: bytes of K plus V one head's forward kernel loads (masked loads count real rows only)."""
    total_rows = 0
    for i in range(-(-n // block_m)):                      # one program per Q row block, ceil(N / BLOCK_M)
        hi = min((i + 1) * block_m, n) if causal else n     # the template's loop bound
        for start in range(0, hi, block_n):                 # whole tiles up to hi ...
            total_rows += min(block_n, n - start)           # ... masked at N
    return 2 * total_rows * d * elem_bytes                  # K and V
