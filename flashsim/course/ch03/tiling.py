"""Chapter 03's own tiled S = QKᵀ: the loop the stepper replays, the tile set it keeps in SRAM, its HBM bytes and
FlashAttention-1's block-size rule (§3.1). The dashboards use these; the exercises ask the learner to write them."""
from __future__ import annotations

import math

from flashsim.model.attention.visibility import n_blocks
from flashsim.model.dtypes import dtype_bytes

__all__ = ["BLOCK_CHOICES", "tiled_qkt_loop", "qkt_tile_set", "tiled_qkt_bytes", "fa1_blocks"]

#: the block sizes the tiling dashboard's sliders offer
BLOCK_CHOICES = (8, 16, 32, 64, 128, 256, 512)


def tiled_qkt_loop(mem, n: int, d: int, block_r: int, block_c: int) -> None:
    """S = Q Kᵀ tile by tile on a Memory holding Q, K (N×d) and an empty S (N×N): Q_i stays in SRAM while the K_j
    stream past; each S_ij is accumulated in fp32 on chip and stored once."""
    for i, r0 in enumerate(range(0, n, block_r)):
        rows = slice(r0, min(r0 + block_r, n))
        q = mem.load("Q", rows=rows, tile=(i,))                       # (Br, d), once per row block
        for j, c0 in enumerate(range(0, n, block_c)):
            cols = slice(c0, min(c0 + block_c, n))
            k = mem.load("K", rows=cols, tile=(j,))                   # (Bc, d), once per tile
            mem.scratch("S_ij", q.shape[0] * k.shape[0] * 4)          # fp32 accumulator on chip
            s = q @ k.T                                               # (Br, Bc)
            mem.compute(2 * q.shape[0] * k.shape[0] * d, tensor="S", tile=(i, j), note="S_ij = Q_i K_jᵀ")
            mem.store("S", s, rows=rows, cols=cols, tile=(i, j))
            mem.free(f"K{(j,)}", "S_ij")
        mem.free(f"Q{(i,)}")


def qkt_tile_set(block_r: int, block_c: int, d: int, dtype: str = "fp16") -> dict:
    """SRAM the tiled QKᵀ holds at once: Q_i and K_j in the storage dtype, the S_ij accumulator in fp32."""
    b = dtype_bytes(dtype)
    return {"Q_i": block_r * d * b, "K_j": block_c * d * b, "S_ij (fp32)": block_r * block_c * 4}


def tiled_qkt_bytes(n: int, d: int, block_r: int, block_c: int, dtype: str = "fp16") -> dict:
    """HBM bytes of the tiled S = QKᵀ: {"read": {"Q": N·d·b, "K": Tr·N·d·b}, "write": {"S": N²·b}}. Bc does not
    appear: only the resident block sets how often the streamed operand is re-read."""
    b = dtype_bytes(dtype)
    return {"read": {"Q": n * d * b, "K": n_blocks(n, block_r) * n * d * b}, "write": {"S": n * n * b}}


def fa1_blocks(sram_bytes: int, d: int, dtype: str) -> tuple[int, int]:
    """FlashAttention-1's block sizes (§3.1) for an SRAM of M elements: Bc = ⌈M / 4d⌉, Br = min(Bc, d)."""
    bc = math.ceil(sram_bytes // dtype_bytes(dtype) / (4 * d))
    return min(bc, d), bc
