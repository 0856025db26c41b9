"""Closed forms for attention spread over several devices, and over SMs by splitting K/V (chapter 13).

Algebra only, independent of the schedules in :mod:`flashsim.model.multi.cluster` (which count the same bytes by
running the loops) and of :mod:`flashsim.distributed.ring` (which measures them on a real ring).

Ring attention (Liu, Zaharia, Abbeel 2023), P devices, sequence N split into P contiguous shards of n = N/P rows.
Device r keeps Q_r and passes K/V blocks to device r+1 (mod P) for P−1 steps; one message is K_j and V_j
together: ``2·B·H·n·d·b`` bytes.

* Non-causal: every device sends P−1 messages.
* Causal (query row i sees keys ≤ i): block j is needed only by devices r ≥ j, so it travels j → j+1 → … → P−1
  and is never sent around the wrap. Device r < P−1 sends r+1 messages, device P−1 sends none: half the total,
  P(P−1)/2 messages, unevenly spread.

Overlap: one ring step computes 4·B·H·n²·d FLOPs (non-causal block) while the next block moves 2·B·H·n·d·b bytes.
The transfer hides behind the compute when 4n²d/F ≥ 2ndb/W, i.e. n ≥ b·F / (2·W): with 2-byte elements, the
block must hold at least F/W rows (peak FLOP/s over link bandwidth), the ring-attention paper's condition.

Split-KV decoding (flash-decoding), per (batch, head), S chunks, query block of Nq rows:
    split kernel   reads Q S times, K and V once; writes S partial outputs (fp32) and S partial logsumexps (fp32)
    combine kernel reads the partials once; writes O (storage dtype) and its logsumexp (fp32)
With S = 1 the kernel writes O and the logsumexp directly and there is no combine.
"""
from __future__ import annotations

from flashsim.model.dtypes import dtype_bytes
from flashsim.errors import FlashsimError

STATS_BYTES = 4  # partial outputs and logsumexps are fp32


def _check_ring(n: int, world: int) -> int:
    n, world = int(n), int(world)
    if world < 1:
        raise FlashsimError(f"world={world} must be >= 1 device")
    if n < world or n % world:
        raise FlashsimError(f"N={n} must be a multiple of the number of devices {world} (each holds N/P rows): "
                            f"use N={max(world, n // world * world)}")
    return n // world


def ring_message_bytes(n: int, d: int, world: int, heads: int = 1, batch: int = 1, dtype="fp16") -> int:
    """Bytes of one ring message: K_j and V_j of one shard, 2·B·H·(N/P)·d·b."""
    return 2 * int(batch) * int(heads) * _check_ring(n, world) * int(d) * dtype_bytes(dtype)


def ring_messages_per_device(world: int, causal: bool = False) -> list[int]:
    """Messages device r sends to device r+1 (mod P) over the whole ring pass.

    >>> ring_messages_per_device(4), ring_messages_per_device(4, causal=True)
    ([3, 3, 3, 3], [1, 2, 3, 0])
    """
    world = int(world)
    if causal:
        return [r + 1 if r < world - 1 else 0 for r in range(world)]
    return [world - 1] * world


def ring_link_bytes(n: int, d: int, world: int, heads: int = 1, batch: int = 1, dtype="fp16",
                    causal: bool = False) -> list[int]:
    """Bytes device r sends on its link to device r+1 (mod P): one entry per device (= per directed link)."""
    msg = ring_message_bytes(n, d, world, heads, batch, dtype)
    return [m * msg for m in ring_messages_per_device(world, causal)]


def ring_total_link_bytes(n: int, d: int, world: int, heads: int = 1, batch: int = 1, dtype="fp16",
                          causal: bool = False) -> int:
    """All link bytes of one ring pass: P(P−1)·msg, or P(P−1)/2·msg when causal."""
    return sum(ring_link_bytes(n, d, world, heads, batch, dtype, causal))


def ring_step_flops(n_block: int, d: int, heads: int = 1, batch: int = 1) -> int:
    """Matmul FLOPs of one full (non-masked) n×n block: 4·B·H·n²·d (S = QKᵀ and PV)."""
    return 4 * int(batch) * int(heads) * int(n_block) ** 2 * int(d)


def overlap_min_block(peak_flops: float, link_bytes_per_s: float, dtype="fp16") -> float:
    """Smallest block n (rows per device) for which a ring step's compute hides its transfer: b·F / (2·W).

    >>> round(overlap_min_block(989e12, 450e9, "fp16"))   # H100/H200 over NVLink 4, per direction
    2198
    """
    return dtype_bytes(dtype) * float(peak_flops) / (2.0 * float(link_bytes_per_s))


def split_kv_bytes(n: int, d: int, splits: int, nq: int = 1, heads: int = 1, batch: int = 1,
                   dtype="fp16") -> dict:
    """Requested bytes of split-KV decoding: {"split": {"loads": {...}, "stores": {...}}, "combine": {...}}.

    Tensor names follow the kernels' arguments (Q, K, V, OP, LSEP, O, LSE). With splits = 1 there is no combine
    and the split kernel stores O and LSE itself.
    """
    b, bh, s = dtype_bytes(dtype), int(batch) * int(heads), int(splits)
    nq, n, d = int(nq), int(n), int(d)
    if s < 1:
        raise FlashsimError(f"splits={s} must be >= 1")
    loads = {"Q": bh * s * nq * d * b, "K": bh * n * d * b, "V": bh * n * d * b}
    if s == 1:
        return {"split": {"loads": loads, "stores": {"OP": bh * nq * d * b, "LSEP": bh * nq * STATS_BYTES}}}
    part = {"OP": bh * s * nq * d * STATS_BYTES, "LSEP": bh * s * nq * STATS_BYTES}
    return {"split": {"loads": loads, "stores": dict(part)},
            "combine": {"loads": dict(part), "stores": {"O": bh * nq * d * b, "LSE": bh * nq * STATS_BYTES}}}


def split_kv_total_bytes(n: int, d: int, splits: int, nq: int = 1, heads: int = 1, batch: int = 1,
                         dtype="fp16") -> int:
    """Loads plus stores of both kernels of :func:`split_kv_bytes`."""
    parts = split_kv_bytes(n, d, splits, nq, heads, batch, dtype)
    return sum(v for launch in parts.values() for kind in launch.values() for v in kind.values())
