"""Block sizes of the CPU kernel: the micro-kernel's tile, and the blocks sized from the CPU's caches (chapter 10).

numpy only: the sizes (and :mod:`flashsim.cpu.memory`'s byte counts) are known without numba installed.
"""
from __future__ import annotations

import functools

import numpy as np

from flashsim.errors import FlashsimError
from flashsim.model.hardware import get_device

#: Rows of Q (and of the output) one micro-kernel call handles: block_r is rounded up to a multiple of this.
TILE_ROWS = 4
#: Columns in one SIMD vector (16 float32 = one AVX-512 register): block_c and d are padded to multiples of this.
TILE_COLS = 16


def _simd_shape() -> tuple[int, int]:
    """(float32 lanes per vector, vectors per micro-kernel row) for this CPU.

    AVX-512 has 32 registers of 16 floats: 4 rows x 4 vectors = 16 accumulators plus 4 loaded vectors and a
    broadcast fit. Elsewhere (AVX2: 16 registers of 8 floats; Arm NEON) 8-float vectors, 2 per row, keep the
    accumulators from spilling to memory.
    """
    try:
        from llvmlite import binding      # lazily: llvmlite comes with numba, an optional dependency

        if binding.get_host_cpu_features().get("avx512f", False):
            return 16, 4
    except Exception:  # noqa: BLE001 - feature detection is best effort; the fallback is always correct
        pass
    return 8, 2


_VEC, _MAX_V = _simd_shape()
_PANEL = max(_VEC * _MAX_V, TILE_COLS)  # columns per panel of the packed K^T (a multiple of TILE_COLS)


def _round_up(x: int, multiple: int) -> int:
    return (x + multiple - 1) // multiple * multiple


@functools.lru_cache(maxsize=1)
def _cpu_hardware():
    """This machine's CPU preset, read from sysfs once (reading it takes ~0.4 ms, as long as a small attention)."""
    return get_device("cpu")


def default_blocks(d: int, hardware=None) -> tuple[int, int]:
    """Block sizes (block_r, block_c) for head dimension ``d``, sized from the CPU preset's caches (chapter 10).

    The rule is the paper's "everything one step touches fits in SRAM", with a CPU core's L2 cache as SRAM
    (``hardware.sram_bytes``, read from sysfs by :func:`flashsim.model.hardware.cpu_preset`). One step of the inner loop
    touches, in float32 (d padded to a multiple of 16):

    * the Q block and its output accumulator: ``2 * block_r * d * 4`` bytes,
    * one K block and one V block: ``2 * block_c * d * 4`` bytes,
    * the score tile S (then P, in place): ``block_r * block_c * 4`` bytes.

    ``block_r`` is 64: a 64 x 64 float32 Q block is 16 KiB, small enough to stay in the 32-48 KiB L1 data cache
    while the K blocks stream past, and N / 64 Q blocks give every core many tasks to share (with dynamic
    scheduling, a core slowed by other work then delays nobody). ``block_c`` is then the largest multiple of 64 (a
    whole number of packed panels of K^T) for which that sum fits in half of the L2 cache, the other half being
    left for what the hardware prefetches, capped at 1024. With 1 MiB of L2 per core and d = 64 that is 64 x 640
    (a 160 KiB S tile, 512 KiB in all). ``benchmarks/cpu_speed.py`` sweeps block_c against the cache sizes: past
    a few hundred columns the time is flat, so the rule is about not being too small, and about staying in L2.

    >>> from flashsim.model.hardware import get_device
    >>> default_blocks(64, get_device("cpu", sram_bytes=1024 * 1024))
    (64, 640)
    """
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d <= 0:
        raise FlashsimError(f"d={d!r} must be a positive integer (the head dimension, q.shape[-1])")
    if hardware is None:
        hardware = _cpu_hardware()
    budget = hardware.sram_bytes // 2
    block_r = 64
    block_c = 64
    for bc in range(64, 1024 + 1, 64):
        if step_working_set_bytes(block_r, bc, d) <= budget:
            block_c = bc
    return block_r, block_c


def step_working_set_bytes(block_r: int, block_c: int, d: int) -> int:
    """float32 bytes one inner-loop step of :func:`flashsim.cpu.flash_attention_cpu` touches: the Q block and its
    accumulator (``2 * block_r * d'``), one K and one V block (``2 * block_c * d'``) and the score tile
    (``block_r * block_c``), with d' = d padded to a multiple of 16 as the kernel stores it. The sum
    :func:`default_blocks` fits in half a core's L2 (chapter 10).

    >>> step_working_set_bytes(64, 640, 64)
    524288
    """
    dp = _round_up(int(d), TILE_COLS)
    return 4 * (2 * int(block_r) * dp + 2 * int(block_c) * dp + int(block_r) * int(block_c))


def effective_blocks(block_r: int, block_c: int) -> tuple[int, int]:
    """The block sizes the kernel really uses: block_r rounded up to a multiple of 4, block_c to a multiple of 16.

    The micro-kernel computes 4 rows x 16 columns (one AVX-512 register per row) at a time.
    """
    return _round_up(int(block_r), TILE_ROWS), _round_up(int(block_c), TILE_COLS)
