"""Correctness checks of the Gluon kernels for benchmarks/gluon_validate.py: forward and backward cases against the
one float64 reference (flashsim.model.attention.reference, on the host) or float64 torch on the GPU, each within 2x
the error of PyTorch's SDPA in the same dtype."""
from __future__ import annotations

from flashsim.model.attention.reference import reference_attention, reference_attention_grads

def rel_err(x, ref):
    import torch
    x = x.double()
    if not torch.isfinite(x).all():
        return float("inf")
    return float((x - ref).norm() / ref.norm())


def _host64(*xs):
    """float64 numpy copies on the host, for the model's reference."""
    return [x.detach().double().cpu().numpy() for x in xs]


def reference(q, k, v, causal, scale):
    """The one float64 reference (flashsim.model.attention.reference) and its natural-log logsumexp, on q's device."""
    import torch
    o, lse = reference_attention(*_host64(q, k, v), causal=causal, sm_scale=scale, return_lse=True)
    return torch.from_numpy(o).to(q.device), torch.from_numpy(lse).to(q.device)


def reference_grads(q, k, v, do, causal, scale):
    """(dq, dk, dv) of the one float64 reference, on q's device."""
    import torch
    grads = reference_attention_grads(*_host64(q, k, v, do), causal=causal, sm_scale=scale)
    return [torch.from_numpy(g).to(q.device) for g in grads]


def check_case(g, dtype, d, causal, B, H, N, pingpong=None, seed=0):
    import torch
    import torch.nn.functional as F
    torch.manual_seed(seed)
    q, k, v = (torch.randn(B, H, N, d, device="cuda", dtype=dtype) for _ in range(3))
    scale = d ** -0.5
    o, lse = g.gluon_forward(q, k, v, causal=causal, pingpong=pingpong)
    torch.cuda.synchronize()
    ref, ref_lse = reference(q, k, v, causal, scale)
    o_torch = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    err, err_t = rel_err(o, ref), rel_err(o_torch, ref)
    lse_err = float((lse.double() - ref_lse).abs().max()) if torch.isfinite(lse).all() else float("inf")
    ok = err <= 2 * err_t + 1e-6 and lse_err <= 1e-3 * max(1.0, float(ref_lse.abs().max()))
    return dict(dtype=str(dtype).replace("torch.", ""), d=d, causal=causal, B=B, H=H, N=N, pingpong=pingpong,
                err=err, err_torch=err_t, lse_err=lse_err, ok=bool(ok))


def check_backward_on_lse(g, dtype, d, causal, N):
    """The course's Triton backward fed with the Gluon forward's (o, lse): gradients vs the float64 reference's,
    each within 2x the error of PyTorch's SDPA gradients in the same dtype."""
    import torch
    import torch.nn.functional as F
    from flashsim.kernels import flash_backward
    torch.manual_seed(3)
    q, k, v, do = (torch.randn(1, 2, N, d, device="cuda", dtype=dtype) for _ in range(4))
    o, lse = g.gluon_forward(q, k, v, causal=causal)
    dq, dk, dv = flash_backward(q, k, v, o, lse, do, causal=causal)
    gref = reference_grads(q, k, v, do, causal, d ** -0.5)
    qt, kt, vt = (t.detach().clone().requires_grad_() for t in (q, k, v))
    gt = torch.autograd.grad(F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal), (qt, kt, vt), do)
    errs = [rel_err(a, r) for a, r in zip((dq, dk, dv), gref)]
    errs_t = [rel_err(a, r) for a, r in zip(gt, gref)]
    ok = all(e <= 2 * et + 1e-6 for e, et in zip(errs, errs_t))
    return dict(dtype=str(dtype).replace("torch.", ""), d=d, causal=causal, N=N, what="flash_backward on gluon lse",
                err=errs, err_torch=errs_t, ok=bool(ok))


def sdpa_grads(q, k, v, do, causal, backend=None):
    """(o, dq, dk, dv) of torch SDPA (a given backend, or the default one) in q's dtype."""
    import contextlib

    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    def attention(qt, kt, vt, causal):
        with contextlib.nullcontext() if backend is None else sdpa_kernel(backend):
            return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
    return grads_of(attention, q, k, v, do, causal)


def gpu64_grads(q, k, v, do, causal, scale):
    """float64 gradients by torch on the GPU (for the timed rows' slices: one head, N^2 float64 scores)."""
    import torch
    qt, kt, vt = (t.detach().double().requires_grad_() for t in (q, k, v))
    s = (qt @ kt.transpose(-1, -2)) * scale
    if causal:
        n = q.shape[-2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    o = torch.softmax(s, -1) @ vt
    return torch.autograd.grad(o, (qt, kt, vt), do.double())


def _torch_o_lse(q, k, v, causal, scale):
    """o from torch SDPA in q's dtype and the fp32 natural-log logsumexp: the backward's inputs, from no course
    kernel (so that a backward check does not depend on the Gluon forward)."""
    import torch
    import torch.nn.functional as F
    s = (q.float() @ k.float().transpose(-1, -2)) * scale
    if causal:
        n = q.shape[-2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal), torch.logsumexp(s, -1).contiguous()


def check_bwd_case(g, dtype, d, causal, B, H, N, config=None, seed=0, gpu_ref=False):
    """Gluon gradients vs float64, each within 2x the error of SDPA's gradients in the same dtype."""
    import torch
    torch.manual_seed(seed)
    q, k, v, do = (torch.randn(B, H, N, d, device="cuda", dtype=dtype) for _ in range(4))
    scale = d ** -0.5
    o, lse = _torch_o_lse(q, k, v, causal, scale)
    dq, dk, dv = g.gluon_backward(q, k, v, o, lse, do, causal=causal, config=config)
    torch.cuda.synchronize()
    gref = gpu64_grads(q, k, v, do, causal, scale) if gpu_ref else reference_grads(q, k, v, do, causal, scale)
    gt = sdpa_grads(q, k, v, do, causal)[1:]
    errs = [rel_err(a, r) for a, r in zip((dq, dk, dv), gref)]
    errs_t = [rel_err(a, r) for a, r in zip(gt, gref)]
    ok = all(e <= 2 * et + 1e-6 for e, et in zip(errs, errs_t))
    return dict(dtype=str(dtype).replace("torch.", ""), d=d, causal=causal, B=B, H=H, N=N, config=config,
                err=errs, err_torch=errs_t, ok=bool(ok))


def grads_of(attention, q, k, v, do, causal):
    """(o, dq, dk, dv) of ``attention(q, k, v, causal) -> o`` (B, H, N, d) through autograd, on copies of q, k, v."""
    import torch
    qt, kt, vt = (t.detach().clone().requires_grad_() for t in (q, k, v))
    o = attention(qt, kt, vt, causal)
    return (o.detach(), *torch.autograd.grad(o, (qt, kt, vt), do))
