"""Random inputs and the error measure shared by the Triton kernel tests."""
import torch


def rel(a, ref):
    """Relative Frobenius error of `a` against a float64 reference."""
    return ((a.double() - ref).norm() / ref.norm()).item()


def random_qkvdo(N, d, dtype, seed, B=1, H=2, grad=False):
    """Four random (B, H, N, d) tensors (q, k, v, do): never zeros, reproducible from `seed`."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, N, d, generator=g).to(dtype).requires_grad_(grad) for _ in range(4)]
