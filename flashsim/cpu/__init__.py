"""The CPU view (course chapter 10): FlashAttention forward on a CPU, where the caches play SRAM.

On a GPU, FlashAttention keeps a Q block, a K/V block and the score tile in an SM's shared memory (SRAM) and never
writes the N x N score matrix S to HBM. A CPU has the same kind of hierarchy: DRAM is slow and large, each core's
L2 cache is small and fast (here it plays SRAM, as :func:`flashsim.model.hardware.cpu_preset` says), and L1 plus the
registers are smaller and faster still. So the same algorithm works here:

* :func:`naive_attention_numpy` is standard attention (the course's Algorithm 0): it materializes the N x N matrix
  S = Q K^T, softmaxes it row by row and multiplies by V. Its extra memory is Theta(N^2).
* :func:`flash_attention_cpu` is blocked FlashAttention forward with the online softmax (chapters 04 and 05),
  compiled with numba. Each Q block is one task, and the tasks run in parallel on the cores (a CPU core plays the
  part of an SM running one thread block). For each K/V block the task computes the score tile
  ``S = Q_blk K_blk^T`` in a small buffer, updates the running row max ``m`` and row sum ``l``, rescales its
  output accumulator and adds ``P V_blk``. Its extra memory is O(N d): padded copies of Q, K^T and V, the output,
  and a few (block_r x block_c) tiles per core. No N x N array is ever allocated.

How it is made fast (what chapter 10 discusses):

* the two small matrix products per tile (``Q_blk K_blk^T`` and ``P V_blk``) run in a register-blocked
  micro-kernel: 4 rows x 64 columns of accumulators stay in 16 AVX-512 registers (4 x 16 in 8 AVX2 registers on
  CPUs without AVX-512) while the inner loop streams over the shared dimension. It is emitted as LLVM vector code
  by a numba intrinsic, because numba's auto-vectorizer does not keep accumulators in registers across a loop;
* K is transposed once (O(N d) extra) so the score tile's columns are contiguous;
* the scale ``sm_scale * log2(e)`` is folded into Q once, so the softmax uses ``2**x``, computed by a vectorizable
  polynomial (numba has no vector ``exp`` without Intel SVML);
* the softmax pass is fused: one loop per row finds the new max, exponentiates in place and sums;
* masked entries (causal, or columns past N) are never given -inf: the loops stop at the last valid column, and the
  probabilities past it are set to 0, so ``fastmath`` (which assumes no infinities) stays safe;
* rows and columns are padded to the micro-kernel's tile (4 rows, 16 columns) once, up front, so there are no
  per-block copies and no ragged edge cases inside the hot loop.

Block sizes are ``block_r`` (Q rows per block, the paper's Br) and ``block_c`` (K/V rows per block, Bc), the
simulator's spelling (the one mapping to the kernels' ``block_m``/``block_n`` is in
:mod:`flashsim.model.attention.visibility`); they default to :func:`default_blocks`, which sizes them from the CPU
preset's caches.

One concern per module: :mod:`~flashsim.cpu.intrinsics` (the numba micro-kernel and ``2**x``),
:mod:`~flashsim.cpu.flash` (the blocked forward), :mod:`~flashsim.cpu.naive` (numpy Algorithm 0),
:mod:`~flashsim.cpu.blocks` (tile and block sizes), :mod:`~flashsim.cpu.memory` (extra bytes),
:mod:`~flashsim.cpu.validate` (argument checks). Importing this package needs no numba; the numba kernel loads on
first use of :func:`flash_attention_cpu`, with a FlashsimError naming ``pip install "flashsim[cpu]"`` without numba.
"""
from __future__ import annotations

from flashsim.cpu.blocks import TILE_COLS, TILE_ROWS, default_blocks, effective_blocks, step_working_set_bytes
from flashsim.cpu.memory import flash_extra_bytes, naive_extra_bytes
from flashsim.cpu.naive import naive_attention_numpy
from flashsim.errors import FlashsimError

__all__ = [
    "flash_attention_cpu",
    "naive_attention_numpy",
    "default_blocks",
    "effective_blocks",
    "step_working_set_bytes",
    "flash_extra_bytes",
    "naive_extra_bytes",
    "TILE_ROWS",
    "TILE_COLS",
]


def __getattr__(name: str):
    """:func:`flash_attention_cpu` on first use: its module compiles numba kernels, an optional dependency."""
    if name == "flash_attention_cpu":
        try:
            from flashsim.cpu.flash import flash_attention_cpu   # lazily: needs numba
        except ImportError as exc:
            raise FlashsimError(f"the CPU FlashAttention kernel needs numba ({exc}): pip install "
                                '"flashsim[cpu]"') from exc
        globals()[name] = flash_attention_cpu
        return flash_attention_cpu
    raise AttributeError(f"module 'flashsim.cpu' has no attribute {name!r}")
