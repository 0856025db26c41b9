"""The attention algorithms, each in step mode (real numbers, one Event per move) and count mode (counters only).

- :mod:`.standard`: Algorithm 0 (S and P materialized in HBM) and the eager-framework op model (chapter 02).
- :mod:`.online_softmax`: online softmax on one row and the (m, l) merge (chapter 04).
- :mod:`.flash`: FlashAttention forward in FA1 and FA2 loop order, backward by recomputation, causal and
  ragged N (chapters 05, 07, 08).
"""
