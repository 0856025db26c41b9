"""Random inputs, the one float64 reference and the error measure shared by the Triton kernel tests."""
import torch

from flashsim.model.attention.reference import reference_attention, reference_attention_grads


def rel(a, ref):
    """Relative Frobenius error of `a` against a float64 reference."""
    ref = ref.to(a.device)
    return ((a.double() - ref).norm() / ref.norm()).item()


def _np(x):
    return x.detach().double().cpu().numpy()


def reference(q, k, v, causal=False, sm_scale=None, return_lse=False):
    """The one reference (flashsim.model.attention.reference) for torch inputs: float64 torch tensors."""
    out = reference_attention(_np(q), _np(k), _np(v), causal=causal, sm_scale=sm_scale, return_lse=return_lse)
    return tuple(torch.from_numpy(x) for x in out) if return_lse else torch.from_numpy(out)


def reference_grads(q, k, v, do, causal=False, sm_scale=None):
    """(dq, dk, dv) of the one reference, float64 torch tensors."""
    grads = reference_attention_grads(_np(q), _np(k), _np(v), _np(do), causal=causal, sm_scale=sm_scale)
    return tuple(torch.from_numpy(g) for g in grads)


def random_qkvdo(N, d, dtype, seed, B=1, H=2, grad=False):
    """Four random (B, H, N, d) tensors (q, k, v, do): never zeros, reproducible from `seed`."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, N, d, generator=g).to(dtype).requires_grad_(grad) for _ in range(4)]
