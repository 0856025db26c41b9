"""flashsim.kernels: the real Triton kernels the course ends each chapter on.

=================  ========  ==========================================================
kernel             chapter   what it shows
=================  ========  ==========================================================
naive_attention    02        three launches; S and P make a round trip through HBM
tiled_matmul       03        tiling: each tile of A and B is loaded once per output tile
online_softmax     04        one pass of running max and running sum per row block
flash_forward      05, 08    FA2 loop order; causal skips fully masked tiles (ch. 08)
flash_backward     07        recomputation: preprocess delta, then dK/dV, then dQ
attention          05, 07    torch.autograd.Function over flash_forward + flash_backward
split_kv_attention 13        flash-decoding: K/V split across programs, merged by logsumexp
=================  ========  ==========================================================

Where they run is decided by one explicit call, :func:`flashsim.kernels.runtime.select_backend` (the course's
``flashsim.course.kit.session.start()`` makes it): a CUDA GPU when torch sees one, else Triton's interpreter on the
CPU. Importing this package takes that rule's answer as a default when nobody chose before
(:func:`~flashsim.kernels.runtime.import_default`: Triton reads the choice when triton is imported and when a kernel
is decorated, so it comes before any kernel module imports triton); an explicit ``select_backend(interpret=...)``
made before triton is imported still replaces it. The import prints nothing and needs neither torch nor triton:
the kernels are loaded when first used, and a :class:`flashsim.errors.FlashsimError` names
``pip install "flashsim[kernels]"`` when torch or triton is missing. Where nobody chose and there is no GPU, the
first kernel used says in one line (stderr) that it runs in the interpreter.
:data:`INTERPRETER`, :data:`INTERPRETER_REASON` and :data:`BACKEND` tell the decision as it stands. In the interpreter the kernels take CPU tensors, fp32 or fp16 (bf16 raises FlashsimError); on a GPU
they take CUDA tensors, fp16, bf16 or fp32.

Block sizes are explicit arguments, ``block_m`` (Q rows per tile, Triton's BLOCK_M = the paper's Br) and
``block_n`` (K/V rows per tile, BLOCK_N = Bc); the mapping is stated once in
:mod:`flashsim.model.attention.visibility`. There is no autotuning: the interpreter cannot autotune, and the IO the
simulator predicts depends on the blocks. Defaults per mode come from :func:`default_blocks`; on a Hopper GPU,
calls without blocks take the launch configurations tuned on an H200 (``_common.TUNED_H200``, chapter 12), and the
flash kernels copy tiles through tensor descriptors (TMA, ``tma=None``). In the interpreter neither happens by
default, so :func:`flashsim.measure.count_io` sees the pointer loads the kernel view models. Outputs of
:func:`flash_forward` and :func:`flash_backward` are NaN-filled in the interpreter, so that a test sees any element
a kernel fails to write; on a GPU they are uninitialised, as PyTorch's are (``FLASHSIM_POISON=1`` fills them there
too: :func:`flashsim.kernels._common.output_like`).
"""
from __future__ import annotations

import importlib

from flashsim.kernels import runtime
from flashsim.kernels.runtime import Backend, select_backend

# the default backend, taken before any kernel module below imports triton (an earlier explicit
# ``select_backend(interpret=...)``, e.g. the course's ``session.start()``, is kept; a later one replaces it
# until triton is imported)
runtime.import_default()

#: public name -> the submodule that defines it (loaded on first use: those modules need torch and triton)
_LAZY = {
    "attention": "autograd", "FlashAttention": "autograd",
    "flash_forward": "flash_fwd", "flash_backward": "flash_bwd",
    "naive_attention": "naive", "tiled_matmul": "matmul", "online_softmax": "softmax",
    "default_blocks": "_common", "interpreter_self_check": "_common",
    "split_kv_attention": "split_kv",
}
#: the decision as it stands: BACKEND (a Backend), INTERPRETER (True when the kernels run in the interpreter: CPU
#: tensors, numpy semantics; False on a GPU), INTERPRETER_REASON (why)
_DECISION = {"BACKEND": lambda b: b, "INTERPRETER": lambda b: b.interpreter, "INTERPRETER_REASON": lambda b: b.reason}

__all__ = ["INTERPRETER", "INTERPRETER_REASON", "BACKEND", "Backend", "select_backend", *_LAZY]


def __getattr__(name: str):
    """The decision as it stands, and the kernels, imported on first use (they need torch and triton)."""
    if name in _DECISION:
        return _DECISION[name](runtime.current())
    if name in _LAZY:
        runtime.current().require()          # a FlashsimError naming the fix when torch or triton is missing
        runtime.announce_default()           # one line where nobody chose and the interpreter runs the kernels
        value = getattr(importlib.import_module(f"flashsim.kernels.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'flashsim.kernels' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
