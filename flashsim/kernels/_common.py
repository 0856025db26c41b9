"""Shared checks for the kernels: clear errors on bad input, the interpreter self-check, default blocks."""
from __future__ import annotations

import math
import numbers
import os

import numpy as np
import torch
import triton
import triton.language as tl

from flashsim.errors import FlashsimError
from flashsim.kernels.runtime import interpreting, select_backend
from flashsim.model.attention import online_softmax

#: log2(e) and ln(2) as Triton compile-time constants (a @triton.jit function reads a global only as a constexpr):
#: the kernels fold LOG2E into the score scale and use exp2; LN2 turns the base-2 logsumexp into natural log
LOG2E = tl.constexpr(online_softmax.LOG2E)
LN2 = tl.constexpr(online_softmax.LN2)

#: the backend decision, made before any kernel module below decorates a kernel (every one imports this module)
BACKEND = select_backend().require()

MAX_HEAD_DIM = 256
_INTERP_DTYPES = (torch.float32, torch.float16)
_GPU_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_SELF_CHECKED = False


def next_pow2(x: int) -> int:
    return 1 << max(0, int(x) - 1).bit_length()


def head_block(d: int) -> int:
    """The padded head dim a tile uses: next power of two, at least 16 (tl.dot needs K >= 16)."""
    return max(16, next_pow2(d))


def default_blocks(kernel: str, d: int = 64) -> tuple[int, int]:
    """(BLOCK_M, BLOCK_N) a kernel uses when none are given: small in the interpreter, GPU-sized otherwise."""
    if interpreting():
        return 32, 32
    if kernel in ("flash_bwd", "flash_backward"):
        return (64, 64) if d <= 128 else (32, 32)
    if kernel in ("flash_fwd", "flash_forward"):
        return (128, 64) if d <= 128 else (64, 32)
    return 64, 64


#: Launch configurations tuned on an NVIDIA H200 (benchmarks/tune_attention.py; its sweeps are indexed in
#: benchmarks/results/README.md), by kernel, padded head dim and causal flag: (BLOCK_M, BLOCK_N,
#: num_warps, num_stages). BLOCK_M counts Q rows and BLOCK_N K/V rows in every kernel; the forward and both
#: backward kernels load through tensor descriptors (TMA) with these. Used when the caller gives no
#: blocks, on Hopper GPUs only; other GPUs and head dims keep :func:`default_blocks`.
TUNED_H200 = {}
for _causal in (False, True):
    TUNED_H200[("flash_fwd", 64, _causal)] = (64, 128, 4, 2)
    TUNED_H200[("flash_fwd", 128, _causal)] = (64, 64, 4, 3) if _causal else (128, 64, 4, 2)
    TUNED_H200[("flash_bwd_dkdv", 64, _causal)] = (32, 64, 4, 3) if _causal else (64, 64, 4, 3)
    TUNED_H200[("flash_bwd_dkdv", 128, _causal)] = (64, 64, 4, 2)
    TUNED_H200[("flash_bwd_dq", 64, _causal)] = (64, 64, 4, 3)
    TUNED_H200[("flash_bwd_dq", 128, _causal)] = (128, 64, 8, 4)


#: (kernel, padded head dim, causal) whose tuned configuration ran faster with pointer loads than with TMA in both
#: H200 sweeps that timed both, N=4096 and N=16384 (benchmarks/results/NOTES.md): with
#: ``tma=None`` and no blocks given, these launches keep pointer loads.
POINTER_LOADS_H200 = frozenset({("flash_bwd_dkdv", 64, True)})


def tuned_config(kernel: str, block_d: int, causal: bool):
    """(BLOCK_M, BLOCK_N, num_warps, num_stages) from :data:`TUNED_H200`, or None: in the interpreter, for head
    dims without an entry, and on GPUs other than Hopper (compute capability 9.x), whose shared memory and
    registers the H200's choices may not fit (the d=128 dQ pass asks for 197 KB of shared memory)."""
    if interpreting():
        return None
    import torch
    if torch.cuda.get_device_capability()[0] != 9:
        return None
    return TUNED_H200.get((kernel, block_d, bool(causal)))


def tma_support(tensors, d: int, block_d: int) -> str | None:
    """Why tensor descriptors (TMA) cannot load these tensors, or None when they can (chapter 12).

    TMA needs a Hopper-or-newer GPU (compute capability >= 9), a head dim that fills the tile (a power of two),
    a unit stride along d, and every other stride and the base address on 16-byte boundaries."""
    if not interpreting():
        import torch
        if torch.cuda.get_device_capability(tensors[0].device)[0] < 9:
            return "tensor descriptors (TMA) need a GPU of compute capability >= 9 (Hopper)"
    try:
        from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: F401
    except ImportError:
        return f"triton {triton.__version__} has no triton.tools.tensor_descriptor"
    if d != block_d:
        return f"head dim {d} is not a power of two >= 16: the tile would need padding, which TMA boxes cannot mask"
    for t in tensors:
        es = t.element_size()
        if t.stride(-1) != 1 or any(st * es % 16 for st in t.stride()[:-1]) or t.data_ptr() % 16:
            return (f"a tensor of strides {tuple(t.stride())} is not 16-byte aligned with unit stride along d: "
                    "call .contiguous()")
    return None


#: head dims whose TMA path was validated on an H200 (correctness sweep and timing); ``tma=None`` uses TMA only
#: for these, ``tma=True`` for any power of two
TMA_VALIDATED_HEAD_DIMS = (64, 128)


def use_tma(tma, tensors, d: int, block_d: int) -> bool:
    """Resolve the ``tma`` argument of a kernel wrapper: None = where it works on a GPU and was validated
    (:data:`TMA_VALIDATED_HEAD_DIMS`); never by default in the interpreter, where the pointer loads are what
    :func:`flashsim.measure.count_io` counts."""
    if tma is not None:
        tma = check_flag("tma", tma)
    if tma is False or (tma is None and (interpreting() or block_d not in TMA_VALIDATED_HEAD_DIMS)):
        return False
    why = tma_support(tensors, d, block_d)
    if why and tma:
        raise FlashsimError(f"tma=True: {why}; or pass tma=False for pointer loads")
    return why is None


def tensor_desc(t, rows: int, block_d: int):
    """A (B, H, N, d) tensor's descriptor with [1, 1, rows, block_d] boxes (rows past N load as 0, stores drop)."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    return TensorDescriptor(t, list(t.shape), list(t.stride()), [1, 1, rows, block_d])


def check_block(name: str, value) -> int:
    """A block size: a power of two from 16 to 256 (Triton tiles and tl.dot need that), else a FlashsimError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise FlashsimError(f"{name}={value!r} must be an integer power of two >= 16, e.g. {name}=32 (or None for "
                            "the default)")
    value = int(value)
    if value < 16 or value & (value - 1):
        raise FlashsimError(f"{name}={value} must be a power of two >= 16 (Triton tiles and tl.dot need that), "
                            f"e.g. {name}=32, or None for the default")
    if value > 256:
        raise FlashsimError(f"{name}={value} is too large: use at most 256")
    return value


def check_blocks(kernel: str, d: int, block_m=None, block_n=None) -> tuple[int, int]:
    """(block_m, block_n) checked, each None replaced by :func:`default_blocks`' choice (0 is an error, not None)."""
    dm, dn = default_blocks(kernel, d)
    return (check_block("block_m", dm if block_m is None else block_m),
            check_block("block_n", dn if block_n is None else block_n))


def check_flag(name: str, value) -> bool:
    """A boolean argument: True/False (or numpy's), strictly: ``causal="False"`` is an error, not True."""
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, numbers.Integral) and value in (0, 1)):
        return bool(value)
    raise FlashsimError(f"{name}={value!r} must be True or False")


def check_launch(num_warps=None, num_stages=None) -> tuple[int | None, int | None]:
    """Launch options: num_warps a power of two from 1 to 32, num_stages >= 1, or None for the kernel's choice."""
    if num_warps is not None:
        if isinstance(num_warps, bool) or not isinstance(num_warps, numbers.Integral) or num_warps not in (
                1, 2, 4, 8, 16, 32):
            raise FlashsimError(f"num_warps={num_warps!r} must be 1, 2, 4, 8, 16 or 32 (or None)")
        num_warps = int(num_warps)
    if num_stages is not None:
        if isinstance(num_stages, bool) or not isinstance(num_stages, numbers.Integral) or num_stages < 1:
            raise FlashsimError(f"num_stages={num_stages!r} must be an integer >= 1 (or None)")
        num_stages = int(num_stages)
    return num_warps, num_stages


def check_tensors(names: tuple[str, ...], *tensors: torch.Tensor, ndim: int | None = None) -> None:
    """Device, dtype and mode checks shared by every kernel wrapper."""
    for name, t in zip(names, tensors):
        if not isinstance(t, torch.Tensor):
            raise FlashsimError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if ndim is not None and t.dim() != ndim:
            raise FlashsimError(f"{name} must have {ndim} dims, got shape {tuple(t.shape)}")
    dtypes = {t.dtype for t in tensors}
    if len(dtypes) > 1:
        listing = ", ".join(f"{n}={t.dtype}" for n, t in zip(names, tensors))
        raise FlashsimError(f"dtypes differ ({listing}): cast them to one dtype, e.g. .to(torch.float16)")
    dtype = tensors[0].dtype
    devices = {t.device for t in tensors}
    if len(devices) > 1:
        raise FlashsimError(f"tensors are on different devices {sorted(map(str, devices))}: move them to one")
    dev = tensors[0].device
    if interpreting():
        if dtype == torch.bfloat16:
            raise FlashsimError("bf16 is not supported in the Triton interpreter (numpy has no bfloat16, so results "
                                "would be silently wrong): use torch.float16 or torch.float32, or run on a CUDA GPU")
        if dtype not in _INTERP_DTYPES:
            raise FlashsimError(f"dtype {dtype} not supported in the interpreter: use torch.float16 or torch.float32")
        if dev.type != "cpu":
            raise FlashsimError(f"interpreter mode takes CPU tensors, got {dev}: call .cpu()")
        interpreter_self_check()
    else:
        if dev.type != "cuda":
            raise FlashsimError(f"tensors are on {dev}, but the kernels are compiled for the GPU: move them with "
                                ".cuda() (or, in a fresh process, call flashsim.kernels.select_backend(interpret=True) "
                                "before using a kernel, to run them in the interpreter)")
        if dtype not in _GPU_DTYPES:
            raise FlashsimError(f"dtype {dtype} not supported: use torch.float16, torch.bfloat16 or torch.float32")


def check_qkv(q, k, v) -> tuple[int, int, int, int]:
    """Validate attention inputs of shape (B, H, N, d); return (B, H, N, d)."""
    check_tensors(("q", "k", "v"), q, k, v, ndim=4)
    if q.shape != k.shape or q.shape != v.shape:
        raise FlashsimError(f"q, k, v shapes differ: {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}: this "
                            "course's kernels take equal (B, H, N, d) shapes (self-attention, same N for Q and K/V)")
    B, H, N, d = q.shape
    if d > MAX_HEAD_DIM:
        raise FlashsimError(f"head dim d={d} > {MAX_HEAD_DIM}: the tiles would not fit in SRAM; split the heads "
                            f"(d <= {MAX_HEAD_DIM})")
    if min(B, H, N, d) < 1:
        raise FlashsimError(f"empty input of shape {tuple(q.shape)}: every dim of (B, H, N, d) must be >= 1")
    return B, H, N, d


def scale_of(sm_scale, d: int) -> float:
    """The softmax scale: 1/sqrt(d) for None, else a finite number > 0 (inf or NaN would make every output NaN)."""
    if sm_scale is None:
        return d ** -0.5
    if isinstance(sm_scale, bool) or not isinstance(sm_scale, numbers.Real):
        raise FlashsimError(f"sm_scale={sm_scale!r} must be a number > 0, or None for 1/sqrt(d)")
    sm_scale = float(sm_scale)
    if not (math.isfinite(sm_scale) and sm_scale > 0):
        raise FlashsimError(f"sm_scale={sm_scale} must be a finite number > 0, e.g. 1/sqrt(d) = {d ** -0.5:.4g} "
                            "(or None for that default)")
    return sm_scale


def forward_launch_options(block_d: int, block_m: int, num_warps=None, num_stages=None, block_n: int = 0,
                           tma: bool = False) -> dict:
    """Launch options of the forward kernels (flash_forward and chapter 12's template share one policy).

    Explicit num_warps/num_stages win; otherwise 128-row Q blocks get 8 warps at a head dim of 128 or more, and,
    with pointer loads (``tma`` False), where the K/V block has 128 rows too: a 128x128 score tile over 4 warps
    runs out of registers there (the causal kernel at d=64 spills, and its local memory reaches DRAM as writes
    beyond the stored bytes; through tensor descriptors it does not spill, and 4 warps were as fast or faster:
    benchmarks/results/NOTES.md). Smaller Q blocks get 4 warps at a head dim
    of 128; other cases keep Triton's default (4).
    """
    extra = {}
    wide = block_m >= 128 and (block_d >= 128 or (block_n >= 128 and not tma))
    if num_warps is not None or block_d >= 128 or wide:
        extra["num_warps"] = num_warps or (8 if wide else 4)
    if num_stages is not None:
        extra["num_stages"] = num_stages
    return extra


def poison_like(t: torch.Tensor, shape=None, dtype=None) -> torch.Tensor:
    """An output buffer filled with NaN: any element a kernel fails to write stays visible."""
    return torch.full(shape if shape is not None else t.shape, float("nan"), dtype=dtype or t.dtype, device=t.device)


def poison_outputs() -> bool:
    """Whether :func:`output_like` fills with NaN: always in the interpreter (where CI checks that the kernels
    write every element), on a GPU only with FLASHSIM_POISON=1 (benchmarks/gpu_validate.py sets it)."""
    return interpreting() or os.environ.get("FLASHSIM_POISON", "0") not in ("", "0")


def output_like(t: torch.Tensor, shape=None, dtype=None) -> torch.Tensor:
    """The output buffer of the fast kernels (flash_forward, flash_backward), which write every element:
    NaN-poisoned where :func:`poison_outputs` says so, else uninitialised like PyTorch's own kernels' outputs:
    on a GPU the NaN fill is a kernel launch of its own, which the timed runs must not pay for (what it costs:
    benchmarks/results/NOTES.md)."""
    if poison_outputs():
        return poison_like(t, shape, dtype)
    return torch.empty(shape if shape is not None else t.shape, dtype=dtype or t.dtype, device=t.device)


@triton.jit
def _self_check_kernel(X, Y, N, BLOCK: tl.constexpr):
    for start in range(0, N, BLOCK):          # a loop over a runtime bound, as every flashsim kernel has
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(X + offs, mask=offs < N, other=0.0)
        tl.store(Y + offs, x * 2.0 + 1.0, mask=offs < N)


def interpreter_self_check(force: bool = False) -> None:
    """Run a tiny kernel once in the interpreter and compare: mismatched numpy/triton builds give silent zeros."""
    global _SELF_CHECKED
    if _SELF_CHECKED and not force:
        return
    x = torch.arange(1, 11, dtype=torch.float32)
    y = torch.zeros(10, dtype=torch.float32)
    try:
        _self_check_kernel[(1,)](x, y, 10, BLOCK=8)
    except Exception as exc:  # pragma: no cover - depends on the installation
        import numpy
        hint = ""
        if "0-dimensional" in repr(exc):
            hint = (" (an older Triton interpreter converts 1-element arrays to int, which numpy >= 2.4 refuses: "
                    "pip install 'numpy<2.4', or the pinned newer triton)")
        raise FlashsimError(f"the Triton interpreter failed a 10-element self-check with numpy "
                            f"{numpy.__version__} and triton {triton.__version__}{hint}: {exc!r}. Install the "
                            "pinned versions (pip install -e .): triton and numpy must match") from exc
    if not torch.equal(y, x * 2 + 1):
        import numpy
        raise FlashsimError(f"the Triton interpreter returned wrong numbers on a 10-element self-check "
                            f"(got {y.tolist()[:4]}...): numpy {numpy.__version__} and triton {triton.__version__} "
                            "do not work together; install the pinned versions (pip install -e .)")
    _SELF_CHECKED = True

