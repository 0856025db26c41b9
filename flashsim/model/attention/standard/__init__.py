"""Standard attention on the simulated hierarchy: Algorithm 0 and the eager-framework op model (chapter 02).

Chapter 02 asks one question: *where do the bytes of standard attention go?* The answer is "to the N×N
matrices". Algorithm 0 of the FlashAttention paper writes the scores S = QKᵀ to HBM, reads them back to compute
P = softmax(S), writes P, and reads it again for O = PV::

    S = scale · Q Kᵀ        # (N, N) written to HBM        read Q, K: 2Nd    write S: N²
    P = softmax(S)          # (N, N) read and written      read S:    N²     write P: N²
    O = P V                 # (N, d)                       read P, V: N²+Nd  write O: Nd

so a head reads (3Nd + 2N²)·b bytes and writes (2N² + Nd)·b, b the bytes of the storage dtype.

A framework running attention *op by op* (PyTorch eager) does more round trips: each op is its own kernel that
reads its inputs from HBM and writes its output back. :class:`EagerOps` says which ops are separate kernels:

    matmul → scale → mask → float cast → softmax → cast back → dropout → matmul

and autograd's backward runs the reverse sequence, every op again a round trip. Algorithm 0 is the special case
where scale and mask are fused into the kernels around them (``NAIVE_OPS``); the Megatron-LM preset adds a
dropout kernel to that (see :mod:`flashsim.model.paper` for why that is the model of FA1's Fig. 2).

Both algorithms are built from one *program*: a list of :class:`Op` (GEMMs, element-wise ops, row softmax and its
backward) over named tensors. The program runs in two modes with identical :class:`~flashsim.model.memory.Counters`:

- **step mode** (:func:`run_standard`) moves real numbers through :class:`~flashsim.model.memory.Memory` tile by tile
  (Br × Bc tiles of the N×N matrices, emitting one Event per load/store/compute), rounding every stored tensor to
  its dtype and computing in fp32;
- **count mode** (:func:`count_standard`) walks the same ops over the same tile grid with numpy arrays of tile
  sizes instead of numbers: microseconds at any N.

Conventions (docs/design.md): each GEMM is an ideal library call that reads each operand tile from HBM once
(``Memory.load(..., count_once=True)``; re-reads are ``reuse_bytes``); the row softmax is ideal too (its second
pass over a row block is a reuse, as if the row stayed on chip); only matmul FLOPs are counted. The tiles change
``sram_peak_bytes`` and ``reuse_bytes``, never the HBM bytes, which are whole-tensor sizes.

Modules: :mod:`.program` (the op model and its presets), :mod:`.blocks` (per-op SRAM tiles, block choice),
:mod:`.count` (count mode), :mod:`.step` (step mode).
"""
from flashsim.model.attention.standard.blocks import resolve_standard_blocks
from flashsim.model.attention.standard.count import StandardCount, count_standard
from flashsim.model.attention.standard.program import (EAGER_PRESETS, NAIVE_OPS, EagerOps, Op, Program, build_program,
                                                       resolve_eager_ops)
from flashsim.model.attention.standard.step import StandardRun, run_standard, standard_host_bytes

__all__ = ["EagerOps", "EAGER_PRESETS", "NAIVE_OPS", "Op", "Program", "StandardCount", "StandardRun",
           "build_program", "resolve_eager_ops", "resolve_standard_blocks", "count_standard", "run_standard",
           "standard_host_bytes"]
