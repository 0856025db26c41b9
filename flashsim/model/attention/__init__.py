"""The attention algorithms, each in step mode (real numbers, one Event per move) and count mode (counters only).

Single definitions every algorithm (and every layer above the model) calls:

- :mod:`.visibility`: the block-size vocabulary (Br/Bc = ``block_r``/``block_c`` = ``BLOCK_M``/``BLOCK_N`` =
  ``block_m``/``block_n``), block counts, ragged blocks and the causal tile-visibility rule.
- :mod:`.reference`: the float64 reference attention (and its gradients, and the plain same-dtype baseline).
- :mod:`.online_softmax`: online softmax on one row, the tile update and the merges (chapter 04).
- :mod:`.memory_model`: peak device memory of a layer, standard against flash (chapter 06).

The algorithms:

- :mod:`.standard`: Algorithm 0 (S and P materialized in HBM) and the eager-framework op model (chapter 02).
- :mod:`.flash`: FlashAttention forward in FA1 and FA2 loop order, backward by recomputation, causal and
  ragged N (chapters 05, 07, 08).
- :mod:`.closed_forms`: their bytes and FLOPs with pencil and paper (FA1's own count included).
- :mod:`.l2_traces`: their tile traces through the L2 model (chapter 09).
"""
