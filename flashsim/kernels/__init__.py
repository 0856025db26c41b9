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
=================  ========  ==========================================================

Interpreter mode is decided here, once, at import: Triton reads ``TRITON_INTERPRET`` when a kernel is
*decorated*, so it must be set before the kernel modules below are imported. If no CUDA GPU is available (and
``TRITON_INTERPRET`` is not set already), this module sets ``TRITON_INTERPRET=1`` and says so on stderr.
:data:`INTERPRETER` tells which mode is in force. In the interpreter the kernels take CPU tensors, fp32 or fp16
(bf16 raises :class:`flashsim.errors.FlashsimError`); on a GPU they take CUDA tensors, fp16, bf16 or fp32.
Block sizes are explicit arguments (no autotuning: the interpreter cannot autotune, and the IO the simulator
predicts depends on the blocks), with per-mode defaults from :func:`default_blocks`. On a Hopper GPU, calls without
blocks take the launch configurations tuned on an H200 (``_common.TUNED_H200``, chapter 12), and on Hopper the
flash kernels copy tiles through tensor descriptors (TMA, ``tma=None``); in the interpreter neither happens by
default, so :func:`flashsim.measure.count_io` sees the pointer loads the kernel view models.
Outputs of :func:`flash_forward` and :func:`flash_backward` are NaN-filled in the interpreter, so that a test sees
any element a kernel fails to write; on a GPU they are uninitialised, as PyTorch's are (``FLASHSIM_POISON=1``
fills them there too: :func:`flashsim.kernels._common.output_like`).
"""
from __future__ import annotations

import os
import sys


def _decide_interpreter() -> tuple[bool, str]:
    env = os.environ.get("TRITON_INTERPRET")
    if env is not None and env not in ("", "0"):
        return True, "TRITON_INTERPRET was set by the caller"
    try:
        import torch
        has_gpu = torch.cuda.is_available()
    except Exception:  # pragma: no cover - torch is a hard dependency
        has_gpu = False
    if has_gpu:
        return False, "a CUDA GPU is available: kernels compile for it"
    os.environ["TRITON_INTERPRET"] = "1"
    print("flashsim.kernels: no CUDA GPU found, so Triton kernels run in the interpreter (TRITON_INTERPRET=1 set)",
          file=sys.stderr)
    return True, "no CUDA GPU found: set TRITON_INTERPRET=1"


#: True when the Triton kernels run in the interpreter (CPU tensors, numpy semantics), False on a GPU.
INTERPRETER, INTERPRETER_REASON = _decide_interpreter()

from flashsim.kernels._common import default_blocks, interpreter_self_check  # noqa: E402
from flashsim.kernels.naive import naive_attention  # noqa: E402
from flashsim.kernels.matmul import tiled_matmul  # noqa: E402
from flashsim.kernels.softmax import online_softmax  # noqa: E402
from flashsim.kernels.flash_fwd import flash_forward  # noqa: E402
from flashsim.kernels.flash_bwd import flash_backward  # noqa: E402
from flashsim.kernels.autograd import attention, FlashAttention  # noqa: E402

__all__ = ["INTERPRETER", "INTERPRETER_REASON", "attention", "FlashAttention", "flash_forward", "flash_backward",
           "naive_attention", "tiled_matmul", "online_softmax", "default_blocks", "interpreter_self_check"]
