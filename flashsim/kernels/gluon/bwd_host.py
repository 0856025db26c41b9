"""The Gluon backward's passes before and after its main kernel (:mod:`flashsim.kernels.gluon.bwd_sm90`), as two
small Triton kernels, each one pass over its tensors:

- :func:`bwd_prologue` (``_gluon_bwd_prologue``): delta = rowsum(dO ∘ O), written straight into the padded rows the
  LSE_SMEM descriptors read (N rounded up to 4 fp32 per head, zeros past N; L copied into such rows too where N is
  not a multiple of 4, or scaled by log2(e) with ``lse_log2``, as FA4's preprocess stores it, so that the main
  kernel does not multiply it on every visit), and the fp32 dQ accumulator zeroed, in one launch (before it: the
  course's ``_bwd_preprocess`` launch, ``torch.zeros`` of the accumulator and, for ragged N, torch copies of the
  rows).
- :func:`dq_epilogue` (``_gluon_dq_epilogue``): dQ = (dq_acc · sm_scale) rounded to q's dtype in one pass (reads
  the fp32 accumulator once, writes dQ once); ``(dq_acc * scale).to(dtype)`` in torch made two passes (an fp32
  product written and read back). The rounding is the same: the product in fp32, then round-to-nearest-even.

The accumulator is B·H·N·d fp32, as large as Q, K, V and dO together in fp16 (128 MiB at the benchmark's
B·N = 16384, H·d = 2048, whatever N), so these passes cost the same at every N and weigh most at small N.
Plain Triton: they run in the interpreter on a CPU too (tests/kernels/test_gluon_bwd_host.py).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from flashsim.model.attention import online_softmax

#: log2(e), the one definition (model.attention.online_softmax), as a Triton constant
_LOG2E = tl.constexpr(online_softmax.LOG2E)

#: elements of one epilogue program (fp32 in, 16-bit out: 16-byte loads of 4 fp32 per thread, 4 warps)
EPILOGUE_BLOCK = 4096


@triton.jit
def _gluon_bwd_prologue(O, DO, DELTA_IN, LSE, LSE_ROWS, DELTA_ROWS, DQ_ACC, N, N_LSE, D,
                        BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr, DELTA_FROM_OD: tl.constexpr,
                        COPY_DELTA: tl.constexpr, COPY_LSE: tl.constexpr, ZERO_DQ: tl.constexpr,
                        LSE_LOG2: tl.constexpr = False):
    """One (row block, batch*head) program. O, dO, dq_acc: (B*H, N, D) contiguous; DELTA_IN, LSE: (B*H, N) fp32;
    LSE_ROWS, DELTA_ROWS: (B*H, N_LSE) fp32 (N_LSE >= N); rows N..N_LSE-1 of each head are written as zeros.
    LSE_LOG2: the copy of L is L·log2(e)."""
    pid_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_D)
    in_n = rows < N
    in_rows = rows < N_LSE                                            # the padded row, zeros past N
    mask = in_n[:, None] & (cols < D)[None, :]
    off = (bh * N + rows)[:, None] * D + cols[None, :]
    if DELTA_FROM_OD:
        # reads O once: N*d elements per head
        o = tl.load(O + off, mask=mask, other=0.0).to(tl.float32)
        # reads dO once: N*d elements per head
        do = tl.load(DO + off, mask=mask, other=0.0).to(tl.float32)
        # writes delta once: N_LSE fp32 per head (zeros past N)
        tl.store(DELTA_ROWS + bh * N_LSE + rows, tl.sum(o * do, 1), mask=in_rows)
    if COPY_DELTA:
        # reads a given delta once and writes it into the padded rows: N fp32 read, N_LSE written per head
        dl = tl.load(DELTA_IN + bh * N + rows, mask=in_n, other=0.0)
        tl.store(DELTA_ROWS + bh * N_LSE + rows, dl, mask=in_rows)
    if COPY_LSE:
        # reads L once and writes it into the padded rows (N not a multiple of 4, or LSE_LOG2): N fp32 read, N_LSE
        # written per head
        lse = tl.load(LSE + bh * N + rows, mask=in_n, other=0.0)
        if LSE_LOG2:
            lse = lse * _LOG2E                                        # the exponent's base-2 offset, once per row
        tl.store(LSE_ROWS + bh * N_LSE + rows, lse, mask=in_rows)
    if ZERO_DQ:
        # writes the fp32 dQ accumulator once (zeros): N*d fp32 per head
        tl.store(DQ_ACC + off, tl.zeros([BLOCK_M, BLOCK_D], tl.float32), mask=mask)


@triton.jit
def _gluon_dq_epilogue(DQ_ACC, DQ, scale, numel, BLOCK: tl.constexpr):
    """dQ = round(dq_acc * scale) over the flat (B*H*N*d) tensors, BLOCK elements per program."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < numel
    # reads dq_acc once: B*H*N*d fp32
    acc = tl.load(DQ_ACC + offs, mask=m, other=0.0)
    # writes dQ once: B*H*N*d elements in q's dtype
    tl.store(DQ + offs, (acc * scale).to(DQ.dtype.element_ty), mask=m)


def n_lse_of(N: int) -> int:
    """The row pitch of the LSE_SMEM rows: N rounded up to a multiple of 4 fp32 (16 bytes)."""
    return -(-N // 4) * 4


def bwd_prologue(o, do, lse, delta=None, *, n_lse: int | None = None, zero_dq: bool = True,
                 lse_log2: bool = False):
    """(lse_rows, delta_rows, dq_acc) for the Gluon backward, in one launch.

    o, do: (B, H, N, d), q's dtype; lse: (B, H, N) fp32; delta: (B, H, N) fp32 rowsum(dO ∘ O), or None (computed
    here from o and do). ``n_lse``: the row pitch of lse_rows and delta_rows (default N rounded up to 4; N gives
    rows of N, as the pointer-load kernel reads them). lse_rows is a view of lse where the pitch is N, else padded
    (zeros past N), and so is delta_rows (a view of a given delta, or the rows computed here). dq_acc: (B, H, N, d)
    fp32 zeros (``zero_dq``), else uninitialised. ``lse_log2``: lse_rows hold L·log2(e) (always a copy), what the
    main kernel's ``LSE_LOG2`` option reads."""
    B, H, N, d = o.shape
    n_lse = n_lse_of(N) if n_lse is None else int(n_lse)
    if n_lse < N:
        raise ValueError(f"n_lse {n_lse} < N {N}")
    dev = o.device
    o, do = o.contiguous(), do.contiguous()
    lse = lse.contiguous().float()
    copy_lse = n_lse != N or lse_log2
    lse_rows = torch.empty((B * H, n_lse), dtype=torch.float32, device=dev) if copy_lse else lse.view(B * H, N)
    delta_from_od = delta is None
    copy_delta = not delta_from_od and n_lse != N
    if delta_from_od or copy_delta:
        delta_rows = torch.empty((B * H, n_lse), dtype=torch.float32, device=dev)
        delta_in = delta.contiguous() if copy_delta else lse            # unread placeholder when computed here
    else:
        delta_rows = delta.contiguous().view(B * H, N)
        delta_in = delta_rows
    dq_acc = torch.empty((B, H, N, d), dtype=torch.float32, device=dev)
    block_d = triton.next_power_of_2(d)
    block_m = max(16, min(128, 4096 // block_d))
    if delta_from_od or copy_delta or copy_lse or zero_dq:
        _gluon_bwd_prologue[(triton.cdiv(n_lse, block_m), B * H)](
            o, do, delta_in, lse, lse_rows, delta_rows, dq_acc, N, n_lse, d, BLOCK_M=block_m, BLOCK_D=block_d,
            DELTA_FROM_OD=delta_from_od, COPY_DELTA=copy_delta, COPY_LSE=copy_lse, ZERO_DQ=zero_dq,
            LSE_LOG2=bool(lse_log2), num_warps=4)
    return lse_rows, delta_rows, dq_acc


def dq_epilogue(dq_acc, scale: float, dtype):
    """(dq_acc · scale) rounded to ``dtype``, in one pass; dq_acc: a contiguous fp32 tensor (any shape)."""
    dq_acc = dq_acc.contiguous()
    dq = torch.empty(dq_acc.shape, dtype=dtype, device=dq_acc.device)
    numel = dq_acc.numel()
    if numel:
        _gluon_dq_epilogue[(triton.cdiv(numel, EPILOGUE_BLOCK),)](dq_acc, dq, float(scale), numel,
                                                                   BLOCK=EPILOGUE_BLOCK, num_warps=4)
    return dq


__all__ = ["bwd_prologue", "dq_epilogue", "n_lse_of", "EPILOGUE_BLOCK"]
