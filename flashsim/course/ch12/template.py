"""The chapter-12 template: a FlashAttention forward kernel whose inner loop body the learner writes (chapter 12).

:func:`flash_forward_template` launches one Triton program per (Q row block, batch·head), exactly like
:func:`flashsim.kernels.flash_forward` (FA2 loop order). The template does everything *around* the inner loop:

* loads the program's Q tile once (``BLOCK_M × BLOCK_D``),
* initialises the running max ``m_i = -inf``, the running sum ``l_i = 0`` and the fp32 accumulator ``acc = 0``,
* runs ``for start_n in range(0, hi, BLOCK_N)`` (``hi = N``, or the diagonal when causal: fully masked tiles are
  skipped) and calls the learner's ``@triton.jit`` function once per K/V tile,
* after the loop writes ``O = acc / l_i`` and the logsumexp ``LSE = (m_i + log2 l_i)·ln 2``.

The loop **body** is the learner's: it loads the K and V tiles itself (so the bytes it moves are its own, and the
checker measures them), computes the scores, masks them, updates ``m_i``, ``l_i`` and ``acc``::

    @triton.jit
    def inner(q, m_i, l_i, acc, k_base, v_base, stride_n, start_n, offs_m, offs_n, offs_d, N, D, qk_scale,
              CAUSAL: tl.constexpr):
        ...
        return m_i, l_i, acc

Arguments, inside one program (shapes in brackets):

* ``q`` [BLOCK_M, BLOCK_D]: the Q tile, in the input dtype (rows ≥ N and columns ≥ D are 0).
* ``m_i`` [BLOCK_M] fp32: running max of the scores *in log2 units* (scores already multiplied by ``qk_scale``).
* ``l_i`` [BLOCK_M] fp32: running sum Σ 2^(s − m_i) over the keys seen so far.
* ``acc`` [BLOCK_M, BLOCK_D] fp32: running Σ 2^(s − m_i)·v (not yet divided by ``l_i``).
* ``k_base``, ``v_base``: pointers to row 0, column 0 of this (batch, head)'s K and V; row r, column c is at
  ``k_base + r * stride_n + c`` (the template makes the tensors contiguous).
* ``start_n``: the first key row of this tile; ``offs_n`` = ``tl.arange(0, BLOCK_N)``, so the tile's key rows are
  ``start_n + offs_n``; ``offs_m`` [BLOCK_M] the program's query rows; ``offs_d`` = ``tl.arange(0, BLOCK_D)``.
* ``N``, ``D``: sequence length and head dim (mask rows ≥ N and columns ≥ D: N need not be a multiple of the
  block, D is padded to a power of two ``BLOCK_D``).
* ``qk_scale`` = ``sm_scale · log2(e)``: multiply ``q·kᵀ`` by it and use ``tl.math.exp2``.
* ``CAUSAL`` (constexpr): mask key rows after the query row (``offs_m[:, None] >= cols[None, :]``).

The kernel's argument names are ``Q, K, V, O, LSE`` as in :func:`flashsim.kernels.flash_forward`, so
:func:`flashsim.measure.count_io` labels the measured bytes the way :func:`flashsim.model.kernel_io.kernel_io` labels
the simulated ones; a correct body moves exactly the bytes of ``kernel_io("flash_fwd", ...)``.
"""
from __future__ import annotations

from flashsim.kernels.runtime import select_backend

select_backend()   # GPU or interpreter, decided before triton is imported (Triton reads it at decoration time)

import torch  # noqa: E402  (heavy optional dependency: this module *is* Triton code)
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from flashsim.errors import FlashsimError  # noqa: E402
from flashsim.kernels._common import (LN2, LOG2E, check_block, check_qkv, default_blocks,  # noqa: E402
                                      forward_launch_options, head_block, poison_like, scale_of)

#: the signature the learner's ``@triton.jit`` inner-loop function must have
INNER_SIGNATURE = ("inner(q, m_i, l_i, acc, k_base, v_base, stride_n, start_n, offs_m, offs_n, offs_d, N, D, "
                   "qk_scale, CAUSAL: tl.constexpr) -> (m_i, l_i, acc)")


@triton.jit
def _flash_template_kernel(Q, K, V, O, LSE, sm_scale, N, D,
                           INNER: tl.constexpr, CAUSAL: tl.constexpr,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    pid_m = tl.program_id(0)                         # which Q row block
    pid_bh = tl.program_id(1)                        # which (batch, head)
    base = pid_bh.to(tl.int64) * N * D               # contiguous (B, H, N, D): this head's first element
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,) query rows
    offs_n = tl.arange(0, BLOCK_N)                    # (BLOCK_N,) key rows within a tile
    offs_d = tl.arange(0, BLOCK_D)                    # (BLOCK_D,) head dim, padded to a power of two
    q_mask = (offs_m[:, None] < N) & (offs_d[None, :] < D)
    # reads Q once: N*d elements per head over all programs
    q = tl.load(Q + base + offs_m[:, None] * D + offs_d[None, :], mask=q_mask, other=0.0)   # (BLOCK_M, BLOCK_D)
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)   # running max (log2 units)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)                 # running sum of 2^(s - m)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)        # running unnormalised output
    qk_scale = sm_scale * LOG2E                                 # log2(e) folded in: exp2 in the body
    if CAUSAL:
        hi = tl.minimum((pid_m + 1) * BLOCK_M, N)    # tiles past the diagonal are fully masked: skipped
    else:
        hi = N
    for start_n in range(0, hi, BLOCK_N):
        # the learner's loop body: loads K_j and V_j, updates (m_i, l_i, acc)
        m_i, l_i, acc = INNER(q, m_i, l_i, acc, K + base, V + base, D, start_n, offs_m, offs_n, offs_d, N, D,
                              qk_scale, CAUSAL)
    acc = acc / l_i[:, None]
    # writes O once: N*d elements per head
    tl.store(O + base + offs_m[:, None] * D + offs_d[None, :], acc.to(O.dtype.element_ty), mask=q_mask)
    lse = (m_i + tl.math.log2(l_i)) * LN2                     # natural-log logsumexp, fp32
    # writes LSE once: N fp32 elements per head
    tl.store(LSE + pid_bh * N + offs_m, lse, mask=offs_m < N)


def is_jit_function(fn) -> bool:
    """True when `fn` is a ``@triton.jit`` function (what the template can call from inside the kernel)."""
    from triton.runtime.interpreter import InterpretedFunction
    return isinstance(fn, (triton.runtime.JITFunction, InterpretedFunction))  # the latter under TRITON_INTERPRET


def flash_forward_template(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, inner, causal: bool = False,
                           sm_scale=None, block_m: int | None = None, block_n: int | None = None,
                           num_warps: int | None = None, num_stages: int | None = None
                           ) -> tuple[torch.Tensor, torch.Tensor]:
    """O = softmax(Q Kᵀ · sm_scale) V with the learner's ``@triton.jit`` loop body `inner` (chapter 12).

    q, k, v: (B, H, N, d), as for :func:`flashsim.kernels.flash_forward`; block sizes default to the same
    per-mode defaults. Returns (o, lse): o in q's dtype (NaN wherever the kernel wrote nothing), lse fp32 (B, H, N).
    """
    if not is_jit_function(inner):
        raise FlashsimError(f"inner must be a @triton.jit function with the signature {INNER_SIGNATURE}; got "
                            f"{type(inner).__name__} (did you forget the @triton.jit decorator?)")
    B, H, N, d = check_qkv(q, k, v)
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    dm, dn = default_blocks("flash_fwd", d)
    block_m = check_block("block_m", block_m or dm)
    block_n = check_block("block_n", block_n or dn)
    scale = scale_of(sm_scale, d)
    block_d = head_block(d)
    o = poison_like(q)                                   # (B, H, N, d), NaN until written
    lse = poison_like(q, (B, H, N), torch.float32)       # (B, H, N)
    extra = forward_launch_options(block_d, block_m, num_warps, num_stages, block_n, tma=False)   # pointer loads
    grid = (triton.cdiv(N, block_m), B * H)
    _flash_template_kernel[grid](q, k, v, o, lse, scale, N, d, INNER=inner, CAUSAL=bool(causal),
                                 BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=block_d, **extra)
    return o, lse
