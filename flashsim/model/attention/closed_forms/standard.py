"""Closed forms for standard attention: the bytes of Algorithm 0 and of the eager op model (chapter 02).

These are the formulas a reader derives on paper, written without tiles or loops; the tests check that the
simulator's counters (:mod:`flashsim.model.attention.standard`, step and count mode) equal them exactly.

Per head, with b the bytes of the storage dtype (fp16: 2), u = N² and everything else in elements:

Algorithm 0 (FlashAttention paper §2.2, Algorithm 0)::

    forward   reads (3Nd + 2N²)·b     writes (2N² + Nd)·b     FLOPs 4N²d
    backward  reads (5Nd + 5N²)·b     writes (3Nd + 2N²)·b     FLOPs 8N²d

The backward is the paper's Algorithm 3 (appendix B): dV = Pᵀ dO, dP = dO Vᵀ, dS = P∘(dP − rowsum(P∘dP)),
dQ = dS K, dK = dSᵀ Q, each GEMM reading its operands once.

The eager model (:class:`~flashsim.model.attention.standard.EagerOps`) adds one N² round trip per separate kernel:
a scale kernel 2u·b, a mask kernel 2u·b + u (1-byte mask), the fp32 detour (cast, softmax in fp32, cast back)
u·b + 4u + 4u + 4u + 4u + u·b instead of 2u·b, dropout u·b read and u·b + u written (the 1-byte keep mask).
Backward mirrors each op (see :func:`eager_io`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from flashsim.model.attention.standard import resolve_eager_ops
from flashsim.model.dtypes import canonical_dtype, dtype_bytes

__all__ = ["StandardIO", "naive_io", "eager_io", "standard_io"]


@dataclass(frozen=True)
class StandardIO:
    """Bytes and FLOPs of one configuration, all heads. ``*_by_tensor`` is filled for Algorithm 0 only."""

    hbm_read_bytes: int
    hbm_write_bytes: int
    flops: int
    read_bytes_by_tensor: dict = field(default_factory=dict)
    write_bytes_by_tensor: dict = field(default_factory=dict)

    @property
    def hbm_bytes(self) -> int:
        return self.hbm_read_bytes + self.hbm_write_bytes


def naive_io(n: int, d: int, dtype="fp16", backward: bool = False, heads: int = 1, batch: int = 1) -> StandardIO:
    """Algorithm 0 (+ Algorithm 3 when backward): exact HBM bytes and matmul FLOPs of batch × heads heads. Causal
    changes nothing: the full S is computed and the mask applied inside the softmax kernel."""
    b, nd, u = dtype_bytes(dtype), n * d, n * n
    reads = {"Q": nd * b, "K": nd * b, "S": u * b, "P": u * b, "V": nd * b}
    writes = {"S": u * b, "P": u * b, "O": nd * b}
    flops = 4 * u * d
    if backward:
        # dP = dO Vᵀ; dV = Pᵀ dO; dS = P∘(dP − D); dQ = dS K; dK = dSᵀ Q
        for name, nbytes in (("dO", 2 * nd * b), ("V", nd * b), ("P", 2 * u * b), ("dP", u * b),
                             ("dS", 2 * u * b), ("K", nd * b), ("Q", nd * b)):
            reads[name] = reads.get(name, 0) + nbytes
        writes.update({"dP": u * b, "dV": nd * b, "dS": u * b, "dQ": nd * b, "dK": nd * b})
        flops += 8 * u * d
    bh = batch * heads
    return StandardIO(sum(reads.values()) * bh, sum(writes.values()) * bh, flops * bh,
                      {k: v * bh for k, v in reads.items()}, {k: v * bh for k, v in writes.items()})


def eager_io(n: int, d: int, dtype="fp16", *, fuse_scale: bool = False, fuse_mask_softmax: bool = False,
             upcast: bool = True, causal: bool = False, dropout: bool = False, backward: bool = False,
             heads: int = 1, batch: int = 1) -> StandardIO:
    """The eager op model's exact bytes of batch × heads heads: one term per kernel, forward then backward
    (chapter 02).

    >>> eager_io(1024, 64, fuse_scale=True, fuse_mask_softmax=True, upcast=False).hbm_read_bytes == \
        naive_io(1024, 64).hbm_read_bytes
    True
    """
    b, nd, u, mask = dtype_bytes(dtype), n * d, n * n, 1
    fp32_detour = upcast and not fuse_mask_softmax and canonical_dtype(dtype) != "fp32"
    e = 4 if fp32_detour else b  # bytes per element of the softmax's input and output
    r = w = 0
    # forward
    r, w = r + 2 * nd * b, w + u * b  # S = Q Kᵀ (scale fused or not)
    if not fuse_scale:
        r, w = r + u * b, w + u * b  # S * scale
    if not fuse_mask_softmax and causal:
        r, w = r + u * b + u * mask, w + u * b  # masked_fill(causal_mask, -inf)
    if fp32_detour:
        r, w = r + u * b, w + u * 4  # .float()
        r, w = r + u * 4, w + u * b  # .half() after the softmax
    r, w = r + u * e, w + u * e  # softmax
    if dropout:
        r, w = r + u * b, w + u * b + u * mask  # dropout writes P_drop and its keep mask
    r, w = r + u * b + nd * b, w + nd * b  # O = P V
    flops = 4 * u * d
    if backward:
        r, w = r + 2 * nd * b, w + u * b  # dP = dO Vᵀ
        r, w = r + u * b + nd * b, w + nd * b  # dV = Pᵀ dO
        if dropout:
            r, w = r + u * b + u * mask, w + u * b  # dP = dP_drop ∘ keep / (1 − p)
        if fp32_detour:
            r, w = r + u * b, w + u * 4  # grad of .half(): dP.float()
            r, w = r + u * 4, w + u * b  # grad of .float(): dS.half()
        r, w = r + 2 * u * e, w + u * e  # dS = P∘(dP − rowsum(P∘dP))
        if not fuse_mask_softmax and causal:
            r, w = r + u * b + u * mask, w + u * b  # grad of masked_fill
        if not fuse_scale:
            r, w = r + u * b, w + u * b  # grad of the scale
        r, w = r + 2 * (u * b + nd * b), w + 2 * nd * b  # dQ = dS K, dK = dSᵀ Q
        flops += 8 * u * d
    return StandardIO(r * batch * heads, w * batch * heads, flops * batch * heads)


def standard_io(algo: str, n: int, d: int, dtype="fp16", *, causal: bool = False, backward: bool = False,
                dropout: bool = False, heads: int = 1, eager_ops=None, batch: int = 1) -> StandardIO:
    """Closed form for algo "naive" or "eager" (eager_ops: an EagerOps or preset name, default "pytorch")."""
    if algo == "naive":
        return naive_io(n, d, dtype, backward, heads, batch)
    ops = resolve_eager_ops(eager_ops)
    return eager_io(n, d, dtype, fuse_scale=ops.fuse_scale, fuse_mask_softmax=ops.fuse_mask_softmax,
                    upcast=ops.upcast, causal=causal, dropout=dropout, backward=backward, heads=heads,
                    batch=batch)
