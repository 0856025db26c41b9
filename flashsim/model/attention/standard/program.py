"""The eager-framework op model (chapter 02): which ops run as separate kernels, and the program they make.

:class:`EagerOps` and its presets say which ops are fused; :func:`build_program` lists the ops of the forward (and
backward) over named tensors with their dtypes and shapes.
"""
from __future__ import annotations

from dataclasses import dataclass

from flashsim.errors import FlashsimError
from flashsim.model.memory import MASK_DTYPE
from flashsim.model.problem import Problem


#: GEMM and element-wise tiles are at most this big by default (a typical library tile)
DEFAULT_MAX_BLOCK = 128


@dataclass(frozen=True)
class EagerOps:
    """Which steps of standard attention run as their own kernel (one HBM round trip each) (chapter 02).

    fuse_scale: the 1/√d scale is applied inside the QKᵀ matmul (``torch.baddbmm(..., alpha=scale)``) instead of
        a separate ``S * scale`` kernel.
    fuse_mask_softmax: causal mask and softmax are one kernel computing in fp32 registers (Megatron's
        ``FusedScaleMaskSoftmax``, or Algorithm 0): no separate mask kernel and no float cast round trip.
    upcast: when not fused, softmax runs in fp32 behind explicit casts (``S.float()`` ... ``P.half()``), as
        ``torch.autocast`` does; ignored for fp32 storage, where the cast is a no-op.
    """

    fuse_scale: bool = False
    fuse_mask_softmax: bool = False
    upcast: bool = True
    name: str = "pytorch"


#: named eager configurations. "pytorch": every op of the list its own kernel. "megatron2020": Megatron-LM's GPT-2
#: self-attention (baddbmm with the scale, fused scale-mask-softmax, dropout, bmm), the FA1 Fig. 2 baseline.
EAGER_PRESETS = {
    "pytorch": EagerOps(),
    "megatron2020": EagerOps(fuse_scale=True, fuse_mask_softmax=True, upcast=False, name="megatron2020"),
}

#: Algorithm 0: three kernels (S = scale·QKᵀ, P = softmax(mask(S)), O = PV), no dropout
NAIVE_OPS = EagerOps(fuse_scale=True, fuse_mask_softmax=True, upcast=False, name="algorithm0")


def resolve_eager_ops(eager_ops=None) -> EagerOps:
    """None → the "pytorch" preset; a preset name; or an EagerOps."""
    if eager_ops is None:
        return EAGER_PRESETS["pytorch"]
    if isinstance(eager_ops, EagerOps):
        return eager_ops
    if isinstance(eager_ops, str) and eager_ops.lower() in EAGER_PRESETS:
        return EAGER_PRESETS[eager_ops.lower()]
    raise FlashsimError(f"unknown eager_ops {eager_ops!r}: use one of {sorted(EAGER_PRESETS)} or an EagerOps(...)")


# --- the program: ops over named tensors ---------------------------------------------------------------------

@dataclass(frozen=True)
class Op:
    """One kernel of standard attention.

    kind: "gemm_nn"  out[i, j] = s · A_i B_jᵀ     (N, N) from two (N, d) operands
          "gemm_nd"  out_i = s · Σ_j X_ij Y_j     (N, d); transpose=True: out_j = s · Σ_i X_ijᵀ Y_i
          "eltwise"  out = fn(ins) tile by tile   (N, N); fn in scale, mask, mask_bwd, cast, dropout, dropout_bwd
          "softmax"  out = softmax(X) per row     (mask=True: causal mask fused in)
          "softmax_bwd"  out = P ∘ (dP − rowsum(P ∘ dP))
    """

    kind: str
    out: str
    ins: tuple
    fn: str = ""
    scale: bool = False  # multiply by 1/√d (fused scale)
    transpose: bool = False
    mask: bool = False  # causal mask fused into the softmax
    extra_out: str = ""  # dropout's 1-byte keep mask


@dataclass(frozen=True)
class Program:
    forward: tuple
    backward: tuple
    dtypes: dict  # tensor name -> storage dtype ("fp16", ..., or "bool")
    shapes: dict  # tensor name -> "nn" (N, N) or "nd" (N, d)


def build_program(ops: EagerOps, dtype: str, causal: bool, dropout: bool, backward: bool) -> Program:
    """The op list of one head: forward, then autograd's reverse (each grad is named "d" + tensor)."""
    dt = dtype
    dtypes = {"Q": dt, "K": dt, "V": dt, "O": dt, "dO": dt, "dQ": dt, "dK": dt, "dV": dt}
    fwd = [Op("gemm_nn", "S", ("Q", "K"), scale=ops.fuse_scale)]
    dtypes["S"] = dt
    x = "S"

    def add(op: Op, out_dtype: str) -> None:
        fwd.append(op)
        dtypes[op.out] = out_dtype

    if not ops.fuse_scale:
        add(Op("eltwise", "S_scaled", (x,), fn="scale"), dt)
        x = "S_scaled"
    if ops.fuse_mask_softmax:
        add(Op("softmax", "P", (x,), mask=causal), dt)
    else:
        if causal:
            dtypes["causal_mask"] = MASK_DTYPE
            add(Op("eltwise", "S_masked", (x, "causal_mask"), fn="mask"), dt)
            x = "S_masked"
        if ops.upcast and dt != "fp32":
            add(Op("eltwise", "S_fp32", (x,), fn="cast"), "fp32")
            add(Op("softmax", "P_fp32", ("S_fp32",)), "fp32")
            add(Op("eltwise", "P", ("P_fp32",), fn="cast"), dt)
        else:
            add(Op("softmax", "P", (x,)), dt)
    x = "P"
    if dropout:
        dtypes["drop_mask"] = MASK_DTYPE
        add(Op("eltwise", "P_drop", ("P",), fn="dropout", extra_out="drop_mask"), dt)
        x = "P_drop"
    add(Op("gemm_nd", "O", (x, "V")), dt)

    bwd = []
    if backward:
        for op in reversed(fwd):
            bwd.extend(_backward_of(op, dtypes))
    shapes = {name: ("nd" if name in ("Q", "K", "V", "O", "dO", "dQ", "dK", "dV") else "nn") for name in dtypes}
    return Program(tuple(fwd), tuple(bwd), dtypes, shapes)


def _backward_of(op: Op, dtypes: dict) -> list:
    """Autograd's kernels for one forward op; grads take their tensor's dtype."""
    ops = _backward_ops(op)
    for b in ops:
        dtypes.setdefault(b.out, dtypes[b.out[1:]])
    return ops


def _backward_ops(op: Op) -> list:
    d = "d" + op.out
    if op.kind == "gemm_nd":  # O = X V  ->  dX = dO Vᵀ, dV = Xᵀ dO
        x, v = op.ins
        return [Op("gemm_nn", "d" + x, (d, v)), Op("gemm_nd", "d" + v, (x, d), transpose=True)]
    if op.kind == "gemm_nn":  # S = s·Q Kᵀ  ->  dQ = s·dS K, dK = s·dSᵀ Q
        q, k = op.ins
        return [Op("gemm_nd", "d" + q, (d, k), scale=op.scale),
                Op("gemm_nd", "d" + k, (d, q), scale=op.scale, transpose=True)]
    if op.kind == "softmax":  # dX = P ∘ (dP − rowsum(P ∘ dP)); masked entries have P = 0, so dX = 0 there
        return [Op("softmax_bwd", "d" + op.ins[0], (op.out, d))]
    x = op.ins[0]
    if op.fn == "scale":
        return [Op("eltwise", "d" + x, (d,), fn="scale")]
    if op.fn == "mask":
        return [Op("eltwise", "d" + x, (d, op.ins[1]), fn="mask_bwd")]
    if op.fn == "cast":
        return [Op("eltwise", "d" + x, (d,), fn="cast")]
    if op.fn == "dropout":
        return [Op("eltwise", "d" + x, (d, op.extra_out), fn="dropout_bwd")]
    raise AssertionError(op)  # pragma: no cover


def program_for(problem: Problem, eager_ops=None) -> tuple[Program, EagerOps]:
    if problem.algo == "naive":
        if problem.dropout_p:
            raise FlashsimError("algo='naive' is Algorithm 0, which has no dropout: use algo='eager' "
                                "(eager_ops='megatron2020' is Algorithm 0 plus a dropout kernel) or dropout_p=0")
        ops = NAIVE_OPS
    elif problem.algo == "eager":
        ops = resolve_eager_ops(eager_ops)
    else:
        raise FlashsimError(f"standard attention runs algo 'naive' or 'eager', not {problem.algo!r}")
    return build_program(ops, problem.dtype, problem.causal, problem.dropout_p > 0, problem.backward), ops
