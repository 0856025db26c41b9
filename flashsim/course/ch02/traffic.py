"""Chapter 02: the HBM bytes of standard attention per forward kernel and against N (shared by the dashboards and
the ``make figures`` figures)."""
from __future__ import annotations

from flashsim.errors import FlashsimError
from flashsim.model.attention.standard import NAIVE_OPS, build_program, resolve_eager_ops
from flashsim.model.simulator import traffic

__all__ = ["EAGER_CHOICES", "eager_op_bytes", "TRAFFIC_NS", "TRAFFIC_ALGOS", "algo_key", "traffic_at",
           "traffic_sweep"]

#: the sequence lengths of the traffic-vs-N plot
TRAFFIC_NS = tuple(2 ** k for k in range(8, 17))        # 256 ... 65536
#: (algo, eager_ops) of its lines
TRAFFIC_ALGOS = (("naive", None), ("eager", "pytorch"), ("flash2", None))


def algo_key(algo, eager_ops) -> str:
    return f"{algo}({eager_ops})" if eager_ops else algo


def traffic_at(algo, eager_ops, n, d, dtype, device):
    """flashsim.traffic of one forward pass, one head."""
    kw = {"eager_ops": eager_ops} if eager_ops else {}
    return traffic(algo, n, d, dtype=dtype, device=device, **kw)


def traffic_sweep(ns, d, dtype, device) -> dict:
    """{algo key: [hbm_bytes at each N of ns]} for the lines of the traffic-vs-N plot."""
    return {algo_key(a, e): [traffic_at(a, e, n, d, dtype, device).hbm_bytes for n in ns] for a, e in TRAFFIC_ALGOS}


_OP_LABELS = {"scale": "S·scale", "mask": "mask", "dropout": "dropout"}


def _op_label(op) -> str:
    if op.kind == "gemm_nn":
        return "S = QKᵀ" + ("·scale" if op.scale else "")
    if op.kind == "gemm_nd":
        return "O = PV"
    if op.kind == "softmax":
        return ("mask+softmax" if op.mask else "softmax") + (" (fp32)" if op.out.endswith("fp32") else "")
    if op.fn == "cast":
        return "cast → fp32" if op.out.endswith("fp32") else "cast → fp16"
    return _OP_LABELS.get(op.fn, op.fn or op.kind)


#: the eager configurations the dashboard offers: label -> (algo, eager_ops)
EAGER_CHOICES = {"Algorithm 0 (3 kernels)": ("naive", None),
                 "Megatron-LM 2020 (FA1 Fig. 2 baseline)": ("eager", "megatron2020"),
                 "PyTorch eager, op by op": ("eager", "pytorch")}


def eager_op_bytes(n: int, d: int, dtype: str = "fp16", algo: str = "eager", eager_ops="pytorch",
                   causal: bool = False, dropout_p: float = 0.0) -> list[tuple[str, int, int]]:
    """[(op label, HBM bytes read, HBM bytes written)] for each forward kernel of standard attention, one head.

    The bytes come from :func:`flashsim.traffic` (per tensor); in the forward pass each tensor is read by exactly
    one op, so an op's bytes are the reads of its inputs plus the writes of its outputs (chapter 02).
    """
    ops = NAIVE_OPS if algo == "naive" else resolve_eager_ops(eager_ops)
    t = traffic(algo, n, d, dtype=dtype, causal=causal, dropout_p=dropout_p,
                **({} if algo == "naive" else {"eager_ops": eager_ops}))
    prog = build_program(ops, dtype, causal, dropout_p > 0, False)
    rows = []
    for op in prog.forward:
        read = sum(t.read_bytes_by_tensor.get(name, 0) for name in op.ins)
        write = t.write_bytes_by_tensor.get(op.out, 0) + (t.write_bytes_by_tensor.get(op.extra_out, 0)
                                                         if op.extra_out else 0)
        rows.append((_op_label(op), int(read), int(write)))
    if sum(r + w for _, r, w in rows) != t.hbm_bytes:
        raise FlashsimError("eager_op_bytes: per-op bytes do not add up to traffic().hbm_bytes")  # pragma: no cover
    return rows
