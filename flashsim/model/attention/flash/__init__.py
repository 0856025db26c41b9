"""FlashAttention on the simulated memory hierarchy: FA1 and FA2 loop orders, backward, causal, ragged N
(chapters 05, 07 and 08).

Attention O = softmax(τ·QKᵀ)·V with τ = 1/√d never needs the N×N matrix S in HBM: split Q into row blocks of
``block_r`` (Br) rows and K, V into column blocks of ``block_c`` (Bc) rows, keep one S tile (Br×Bc) in SRAM at a
time, and carry the online-softmax statistics m (row max) and l (denominator) from tile to tile
(:mod:`flashsim.model.attention.online_softmax`). The two papers differ in the *loop order*, and that changes the bytes:

- **flash1** (FA1, Algorithm 1): outer loop over K/V blocks j, inner over Q blocks i. Each inner step re-reads
  Q_i, O_i, l_i, m_i from HBM and writes O_i, l_i, m_i back: Tc·(3Nd + 4N) elements, plus 2Nd for K and V.
- **flash2** (FA2): outer loop over Q blocks i. Q_i, the O accumulator and m, l stay on chip for the whole row
  block; O_i is written once, with the logsumexp L_i = m_i + log l_i for the backward.
- **backward** (FA1 Algorithm 4 / FA2): recompute S and P tile by tile from Q, K and the saved statistics instead of
  reading an N×N P. Outer loop over K/V blocks j (dK_j, dV_j accumulate on chip), inner over Q blocks i (dQ_i is
  read, updated and written back per tile). flash1 recomputes D_i = rowsum(dO_i ∘ O_i) per tile from O_i;
  flash2 runs a preprocess pass that writes D once, then reads L_i and D_i per tile.
- **causal** (query row r sees key columns c ≤ r): tile (i, j) is skipped (no loads, no FLOPs) when every column
  of it lies right of every row, i.e. j·Bc > min((i+1)·Br, N) − 1
  (:func:`~flashsim.model.attention.visibility.tile_visible`); a tile the diagonal crosses is computed and
  masked element-wise.
- **ragged N**: the last block has N − (T−1)·B rows; loads and stores count only real rows.

Each algorithm runs in two modes with identical :class:`~flashsim.model.memory.Counters`:

- *step mode* (:func:`run_flash`): real numbers through :class:`~flashsim.model.memory.Memory`, one Event per load,
  store, compute and free, with tile indices, bytes and the running m and l (and the O rows) of the row block.
  Storage dtypes fp32/fp16/bf16 are emulated by rounding on store; every tile computation is fp32. No N×N array
  is ever built. The result is exact in real arithmetic, not bitwise equal to a float64 computation.
- *count mode* (:func:`count_flash`): the same loop structure, vectorized over the outer loop index, no numbers.

The closed forms in :mod:`flashsim.model.attention.closed_forms.flash` are derived separately; the tests check all
three agree. The causal rule, block counts and ragged blocks are :mod:`flashsim.model.attention.visibility`'s (which
also states the block-size vocabulary: Br = ``block_r`` = ``BLOCK_M`` = ``block_m``, Bc = ``block_c`` = ``BLOCK_N`` =
``block_n``).

Modules: :mod:`.blocks` (the SRAM tile set, block choice), :mod:`.count` (count mode), :mod:`.forward` and
:mod:`.backward` (step mode's tile loops), :mod:`.stepper` (their per-head context), :mod:`.step` (:func:`run_flash`).

Two conventions worth knowing (docs/design.md):

- Initialising O, l, m in HBM before FA1's loop (Algorithm 1, line 2) and zeroing dQ before the backward loop are
  memsets outside the loop: reported as ``init_write_bytes``, not in ``hbm_write_bytes`` (FA1's Fig. 2 excludes
  them: 6.85 GB at Bc = 64).
- Dropout, when asked for, is regenerated on chip from an RNG seed (as in the FlashAttention kernels): it moves no
  HBM bytes, and step mode runs without it.

>>> from flashsim.model.problem import make_problem
>>> p = make_problem("flash1", n=1024, d=64, block_c=64, dtype="fp16", stats_dtype="fp16", sram_bytes=1 << 20)
>>> from flashsim.model.attention.closed_forms.flash import fa1_paper_hbm_elements  # 2Nd + Tc·(3Nd + 4N)
>>> count_flash(p).counters.hbm_bytes == fa1_paper_hbm_elements(1024, 64, 64) * 2
True
"""
from flashsim.model.attention.flash.blocks import FLASH_ALGOS, resolve_blocks, sram_peak_bytes, sram_tile_bytes
from flashsim.model.attention.flash.count import FlashCount, count_flash
from flashsim.model.attention.flash.step import FlashRun, run_flash, step_host_bytes

__all__ = ["FLASH_ALGOS", "FlashCount", "FlashRun", "count_flash", "resolve_blocks", "run_flash", "sram_peak_bytes",
           "sram_tile_bytes", "step_host_bytes"]
