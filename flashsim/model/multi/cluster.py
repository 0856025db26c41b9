"""Several simulated devices joined by links: ring attention and flash-decoding schedules (chapter 13).

A :class:`Cluster` holds P devices, each with its own HBM/SRAM counters (:class:`flashsim.model.memory.Counters`, one per
device), and a ring of directed links r → r+1 (mod P), each with a bandwidth preset and byte counters. Schedules
run their loops on it and count; :mod:`flashsim.model.multi.closed_forms` has the closed forms they must equal, and
:mod:`flashsim.distributed.ring` runs the same ring on real processes (``torch.distributed``) and measures the bytes.

* :func:`ring_attention`: device r keeps Q_r; for P steps it computes Q_r against the K/V block it holds (one
  FlashAttention-2 kernel per block: its HBM bytes are :func:`flashsim.traffic`'s for an n×n problem, causal on
  the diagonal block, skipped above it), merges the partial result into its running (O, logsumexp) in HBM, and
  passes the block on. A send reads the block from the sender's HBM and writes it into the receiver's; the link
  counts it. ``numbers=True`` also computes the output (numpy, float64) to show it is exact.
* :func:`flash_decoding`: one device; the split kernel's programs and the combine kernel's, their bytes, and a
  time model in which one SM streams at most its share of HBM bandwidth (HBM bandwidth / number of SMs): one
  program alone cannot saturate HBM, which is why splitting K/V over more programs pays off (measured: chapter
  13's recorded ``flash_decoding_h200``).
* :func:`ring_step_times`, :func:`overlap_threshold`: one ring step's compute time 4·B·H·n²·d / F against its
  transfer time 2·B·H·n·d·b / W; the transfer hides behind the compute when n ≥ b·F / (2·W).

Link presets are per direction (a link's datasheet "bidirectional" figure is twice that); the model has no
latency term (bandwidth only), which is fine for the MiB-sized messages of attention.

Modules: :mod:`.links` (presets, :class:`Cluster`), :mod:`.ring` (ring attention, overlap), :mod:`.decoding`
(flash-decoding); this module gathers their public names (chapter 13 imports them from here).
"""
from flashsim.model.attention.online_softmax import combine_partials
from flashsim.model.multi.decoding import FlashDecodingResult, flash_decoding, split_partials
from flashsim.model.multi.links import LINK_PRESETS, Cluster, LinkSpec, get_link
from flashsim.model.multi.ring import (RingResult, RingStep, block_attention_numpy, overlap_threshold, ring_attention,
                                       ring_step_times)

# combine_partials is flashsim.model.attention.online_softmax's (the one merge), gathered here for chapter 13.
__all__ = ["LinkSpec", "LINK_PRESETS", "get_link", "Cluster", "RingStep", "RingResult", "ring_attention",
           "FlashDecodingResult", "flash_decoding", "ring_step_times", "overlap_threshold", "split_partials",
           "combine_partials", "block_attention_numpy"]
