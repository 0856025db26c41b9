"""flashsim.kernels.attention against torch, both against the one float64 reference (the GPU correctness check).

The kernel test on a GPU (``tests/kernels/test_kernels_gpu.py``) and the validation script
(``benchmarks/gpu_validate.py``) ask the same question, so both call :func:`attention_vs_torch`: forward and
backward through :func:`flashsim.kernels.attention` and through torch's ``scaled_dot_product_attention`` on the
same inputs, each output's relative error against :mod:`flashsim.model.attention.reference` (float64, on the
host), and a pass when every output is finite and within twice torch's error in the same dtype.
"""
from __future__ import annotations

from flashsim import kernels as K
from flashsim.model.attention.reference import reference_attention, reference_attention_grads

#: the names of the compared outputs, in the order of :func:`attention_vs_torch`'s result
OUTPUTS = ("o", "dq", "dk", "dv")
#: an output passes when its error is at most this many times torch's
TORCH_ERROR_FACTOR = 2.0


def _host64(*xs):
    return [x.detach().double().cpu().numpy() for x in xs]


def attention_vs_torch(q, k, v, do, causal: bool = False) -> dict:
    """Errors of flashsim's attention and of torch's SDPA against float64: {"o", "dq", "dk", "dv": {"err",
    "torch_err", "finite"}, "pass": bool}.

    q, k, v, do: (B, H, N, d) tensors of the storage dtype on the kernels' device. err is the relative Frobenius
    error ‖x − ref‖ / ‖ref‖; pass: every output of ours finite and err ≤ TORCH_ERROR_FACTOR × torch_err.
    """
    import torch
    import torch.nn.functional as F
    ql, kl, vl = (x.clone().requires_grad_() for x in (q, k, v))
    o = K.attention(ql, kl, vl, causal=causal)
    o.backward(do)
    qt, kt, vt = (x.clone().requires_grad_() for x in (q, k, v))
    ot = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
    ot.backward(do)
    host = _host64(q, k, v, do)
    refs = [reference_attention(*host[:3], causal=causal)] + list(reference_attention_grads(*host, causal=causal))
    result, ok = {}, True
    for name, ours, theirs, ref in zip(OUTPUTS, (o, ql.grad, kl.grad, vl.grad), (ot, qt.grad, kt.grad, vt.grad),
                                       refs):
        ref = torch.from_numpy(ref).to(ours.device)
        e_ours = ((ours.double() - ref).norm() / ref.norm()).item()
        e_torch = ((theirs.double() - ref).norm() / ref.norm()).item()
        finite = bool(torch.isfinite(ours).all())
        result[name] = {"err": e_ours, "torch_err": e_torch, "finite": finite}
        ok &= finite and e_ours <= TORCH_ERROR_FACTOR * e_torch
    result["pass"] = ok
    return result
