"""The one reference attention: O = softmax(τ·QKᵀ [causal mask]) V in float64, and its gradients.

Everything that asks "is this attention output right?" compares against :func:`reference_attention` (and, for a
backward pass, :func:`reference_attention_grads`): the simulator's error (``simulate``), the tests of the step
and count modes, the course's checkers, the Triton kernels' tests and the GPU validation. Keeping one definition
means one causal convention, one scale and one logsumexp for all of them.

- **Shapes**: ``q`` (…, Nq, d), ``k`` and ``v`` (…, Nk, d) with the same leading (batch, head) dimensions;
  ``O`` is (…, Nq, d) and the logsumexp (…, Nq). Anything ``np.asarray`` accepts (a torch tensor after
  ``.double().cpu()``).
- **Scale**: ``sm_scale`` τ, default 1/√d (:func:`softmax_scale`).
- **Causal**: query row r sees key columns c ≤ r (top-left aligned when Nq ≠ Nk), the element-wise rule of
  :func:`flashsim.model.attention.visibility.causal_mask`.
- **Logsumexp**: natural log, L_r = log Σ_c e^(τ·q_r·k_c) over the visible columns (what FA2 saves for the
  backward; a kernel working in base 2 divides by ln 2).
- **Memory**: rows are processed in chunks of ``row_chunk`` queries (default: 32 MiB of float64 scores per
  chunk), one (batch, head) slice at a time, so memory is O(chunk·Nk), never O(N²) per call: GPU validation
  calls it at N = 16384.

:func:`plain_attention` is the same formula computed the way a framework computes it in a storage dtype (fp32,
fp16, bf16): every stored tensor rounded, matmuls in fp32. It is the yardstick of ``simulate``'s tolerance ("at
most twice the error of a plain implementation in the same dtype"), not a reference.

>>> import numpy as np
>>> q = np.eye(2)[None]                      # (1, 2, 2)
>>> o, lse = reference_attention(q, q, q, causal=True, return_lse=True)
>>> o[0, 0].tolist(), round(float(lse[0, 0]), 4)
([1.0, 0.0], 0.7071)
"""
from __future__ import annotations

import math

import numpy as np

from flashsim.errors import FlashsimError
from flashsim.model.attention.visibility import causal_mask
from flashsim.model.dtypes import canonical_dtype, round_to

__all__ = ["plain_attention", "reference_attention", "reference_attention_grads", "reference_forward_backward",
           "softmax_scale", "DEFAULT_CHUNK_BYTES"]

#: float64 scores held per chunk of query rows (the chunk is DEFAULT_CHUNK_BYTES / (8·Nk) rows)
DEFAULT_CHUNK_BYTES = 32 * 1024**2


def softmax_scale(d: int) -> float:
    """τ = 1/√d, the scale of QKᵀ."""
    return 1.0 / math.sqrt(d)


def reference_attention(q, k, v, causal: bool = False, *, sm_scale: float | None = None, return_lse: bool = False,
                        keep=None, dropout_p: float = 0.0, row_chunk: int | None = None):
    """softmax(τ·QKᵀ [causal]) [∘ keep/(1−p)] V in float64 over (…, N, d) arrays; with `return_lse`, (O, L).

    keep: optional (…, Nq, Nk) bool dropout mask (True = kept), scaled by 1/(1 − dropout_p). L is the natural-log
    logsumexp of the scaled, masked scores (before dropout), (…, Nq).
    """
    o, lse, _ = _run(q, k, v, None, causal, sm_scale, keep, dropout_p, None, row_chunk, return_lse)
    return (o, lse) if return_lse else o


def reference_attention_grads(q, k, v, do, causal: bool = False, *, sm_scale: float | None = None, keep=None,
                              dropout_p: float = 0.0, row_chunk: int | None = None):
    """Float64 gradients (dq, dk, dv) of sum(O ∘ dO) for O = :func:`reference_attention`, each shaped as q, k, v."""
    return _run(q, k, v, do, causal, sm_scale, keep, dropout_p, None, row_chunk, False)[2]


def reference_forward_backward(q, k, v, do=None, causal: bool = False, *, sm_scale: float | None = None, keep=None,
                               dropout_p: float = 0.0, row_chunk: int | None = None):
    """(O, (dq, dk, dv) or None) in float64 in one pass over the rows (what ``simulate`` compares against)."""
    o, _, grads = _run(q, k, v, do, causal, sm_scale, keep, dropout_p, None, row_chunk, False)
    return o, grads


def plain_attention(q, k, v, do=None, causal: bool = False, *, dtype, sm_scale: float | None = None, keep=None,
                    dropout_p: float = 0.0, row_chunk: int | None = None, delta: str = "softmax"):
    """The plain implementation of the same formula in storage `dtype`: (O, (dq, dk, dv) or None), float32.

    S, P, the dropped P, O and in the backward dP, dS, dQ, dK, dV are each rounded to `dtype`, every matmul
    accumulated in fp32 on the given values (round the inputs first for a storage-dtype run): what a framework's
    fp16 attention computes. ``simulate``'s tolerance is twice its error.

    delta: how the backward forms D in dS = P ∘ (dP − D): "softmax" D = rowsum(P ∘ dP) (the softmax's own
    gradient, what a framework's op-by-op backward does) or "output" D = rowsum(dO ∘ O) from the stored O
    (FlashAttention's backward: D is the same number in real arithmetic, but it carries O's rounding into the
    difference dP − D). simulate measures the flash algorithms against "output", the same formula.
    """
    if delta not in ("softmax", "output"):
        raise FlashsimError(f"delta={delta!r}: use 'softmax' (rowsum(P∘dP)) or 'output' (rowsum(dO∘O))")
    return _run(q, k, v, do, causal, sm_scale, keep, dropout_p, canonical_dtype(dtype), row_chunk, False,
                delta)[::2]


def _run(q, k, v, do, causal, sm_scale, keep, dropout_p, dtype, row_chunk, want_lse, delta="softmax"):
    """Shared driver: checks shapes, then runs :func:`_one_head` on every leading (batch, head) index."""
    ft = np.float64 if dtype is None else np.float32
    q, k, v = (np.asarray(x, ft) for x in (q, k, v))
    if q.ndim < 2 or k.ndim != q.ndim or v.ndim != q.ndim:
        raise FlashsimError(f"reference attention takes (..., N, d) arrays of one rank: got q {q.shape}, "
                            f"k {k.shape}, v {v.shape}")
    lead = q.shape[:-2]
    if k.shape[:-2] != lead or v.shape[:-2] != lead or k.shape[-1] != q.shape[-1] or v.shape[-2] != k.shape[-2]:
        raise FlashsimError(f"q {q.shape}, k {k.shape}, v {v.shape}: need q (..., Nq, d), k (..., Nk, d) and "
                            "v (..., Nk, dv) with the same leading dimensions")
    if do is not None:
        do = np.asarray(do, ft)
        if do.shape != lead + (q.shape[-2], v.shape[-1]):
            raise FlashsimError(f"do has shape {do.shape}: expected the output's {lead + (q.shape[-2], v.shape[-1])}")
    if keep is not None:
        keep = np.broadcast_to(np.asarray(keep), lead + (q.shape[-2], k.shape[-2]))
    tau = softmax_scale(q.shape[-1]) if sm_scale is None else float(sm_scale)
    o = np.empty(lead + (q.shape[-2], v.shape[-1]), ft)
    lse = np.empty(lead + (q.shape[-2],), np.float64) if want_lse else None
    grads = None if do is None else (np.empty(q.shape, ft), np.empty(k.shape, ft), np.empty(v.shape, ft))
    for idx in np.ndindex(*lead):
        res = _one_head(q[idx], k[idx], v[idx], None if do is None else do[idx], causal, tau,
                        None if keep is None else keep[idx], dropout_p, dtype, row_chunk, want_lse, delta)
        o[idx] = res[0]
        if want_lse:
            lse[idx] = res[1]
        if grads is not None:
            for g, x in zip(grads, res[2]):
                g[idx] = x
    return o, lse, grads


def _one_head(q, k, v, do, causal, tau, keep, dropout_p, dtype, row_chunk, want_lse, delta="softmax"):
    """One head (Nq, d) in chunks of query rows: (o, lse or None, (dq, dk, dv) or None)."""
    exact = dtype is None
    ft = np.float64 if exact else np.float32

    def rnd(x):
        return x if exact else round_to(x, dtype)

    n, n_k = q.shape[0], k.shape[0]
    row_chunk = row_chunk or max(1, min(n, DEFAULT_CHUNK_BYTES // (8 * n_k)))
    o = np.empty((n, v.shape[1]), ft)
    lse = np.empty(n, np.float64) if want_lse else None
    grads = None
    if do is not None:
        dq, dk, dv = np.empty(q.shape, ft), np.zeros(k.shape, ft), np.zeros(v.shape, ft)
    with np.errstate(all="ignore"):
        for r0 in range(0, n, row_chunk):
            rows = slice(r0, min(r0 + row_chunk, n))
            s = rnd((q[rows] @ k.T) * ft(tau))  # (chunk, Nk)
            if causal:
                s = np.where(causal_mask(rows.start, rows.stop - rows.start, 0, n_k, always=True), -np.inf, s)
            m = s.max(axis=1, keepdims=True)  # (chunk, 1)
            e = np.exp(s - m)
            den = e.sum(axis=1, keepdims=True)
            if want_lse:
                lse[rows] = (m + np.log(den))[:, 0]
            p = rnd(e / den)
            pd = rnd(p * keep[rows] / ft(1 - dropout_p)) if keep is not None else p
            o[rows] = rnd(pd @ v)
            if do is not None:
                dv += pd.T @ do[rows]
                dpd = rnd(do[rows] @ v.T)
                dp = rnd(dpd * keep[rows] / ft(1 - dropout_p)) if keep is not None else dpd
                if delta == "output":  # FlashAttention's D = rowsum(dO ∘ O), from the stored O
                    d_row = (do[rows] * o[rows]).sum(axis=1, keepdims=True)
                else:  # the softmax gradient's own D = rowsum(P ∘ dP)
                    d_row = (p * dp).sum(axis=1, keepdims=True)
                ds = rnd(p * (dp - d_row))
                dq[rows] = rnd((ds @ k) * ft(tau))
                dk += ds.T @ q[rows]
        if do is not None:
            grads = (dq, rnd(dk * ft(tau)), rnd(dv))
    return o, lse, grads
