"""Flash-decoding (split-KV) on one simulated device (chapter 13): programs, bytes, and a time model.

The split kernel's programs each read Q and one chunk of K/V; with more than one split a combine program per
batch·head merges the partials by their logsumexps (the one merge,
:func:`flashsim.model.attention.online_softmax.combine_partials`). The time model lets one SM stream at most its
share of HBM bandwidth (HBM bandwidth / number of SMs): one program alone cannot saturate HBM, which is why
splitting K/V over more programs pays off (measured: chapter 13's recorded ``flash_decoding_h200``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from flashsim.model.attention.reference import reference_attention, softmax_scale
from flashsim.model.dtypes import dtype_bytes
from flashsim.model.hardware import Hardware, get_device
from flashsim.model.memory import Counters
from flashsim.model.multi import closed_forms as closed

__all__ = ["FlashDecodingResult", "flash_decoding", "split_partials"]


def split_partials(q, k, v, splits: int, scale: float | None = None):
    """Flash-decoding's first kernel in numpy: K/V cut into `splits` contiguous chunks (as equal as possible);
    returns (o_parts (S, nq, d), lse_parts (S, nq))."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    scale = softmax_scale(q.shape[-1]) if scale is None else scale
    bounds = np.linspace(0, k.shape[0], int(splits) + 1).round().astype(int)
    parts = [reference_attention(q, k[a:b], v[a:b], sm_scale=scale, return_lse=True)
             for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
    return np.stack([p[0] for p in parts]), np.stack([p[1] for p in parts])


# --- flash-decoding --------------------------------------------------------------------------------------------------
@dataclass
class FlashDecodingResult:
    """Split-KV decoding on one simulated device: programs, bytes by kernel and tensor, and modelled time."""
    n: int
    d: int
    heads: int
    batch: int
    nq: int
    splits: int
    dtype: str
    device: Hardware
    programs: int                 # of the split kernel
    waves: int                    # ceil(programs / SMs)
    sm_busy_fraction: float       # SMs with work in the first wave / SMs
    counters: dict                # {"split": Counters, "combine": Counters}
    split_s: float
    combine_s: float

    @property
    def time_s(self) -> float:
        return self.split_s + self.combine_s

    @property
    def hbm_bytes(self) -> int:
        return sum(c.hbm_bytes for c in self.counters.values())


def _stream_time(programs: int, bytes_per_program: float, hw: Hardware) -> tuple[float, int]:
    """Seconds for `programs` equal programs each streaming `bytes_per_program`: each SM streams at most
    HBM bandwidth / SMs, programs run in waves of one per SM; never faster than all bytes at full bandwidth."""
    waves = math.ceil(programs / hw.num_sms)
    per_sm = hw.hbm_bandwidth_bytes_per_s / hw.num_sms
    return max(waves * bytes_per_program / per_sm, programs * bytes_per_program / hw.hbm_bandwidth_bytes_per_s), waves


def flash_decoding(n: int, d: int, heads: int = 1, batch: int = 1, splits: int = 1, nq: int = 1, dtype="fp16",
                   device="h200", block_n: int = 64) -> FlashDecodingResult:
    """Simulate :mod:`flashsim.kernels.split_kv` (chapter 13): one program per (chunk, batch·head) reads Q and its
    chunk of K/V; with splits > 1 a combine program per batch·head merges the partials by their logsumexps.

    Chunks are whole ``block_n`` tiles, as the kernel cuts them, so ``splits`` may shrink for tiny N.
    """
    hw = get_device(device)
    b, bh, nq, n, d = dtype_bytes(dtype), int(batch) * int(heads), int(nq), int(n), int(d)
    tiles = math.ceil(n / block_n)
    chunk = math.ceil(tiles / min(int(splits), tiles)) * block_n
    s = math.ceil(n / chunk)
    split, comb = Counters(), Counters()
    longest = 0
    for i in range(s):                                       # one chunk; the bh programs of it are alike
        rows = min(chunk, n - i * chunk)
        split.add_read("Q", bh * nq * d * b)
        split.add_read("K", bh * rows * d * b)
        split.add_read("V", bh * rows * d * b)
        split.flops += bh * 4 * nq * rows * d
        if s == 1:
            split.add_write("OP", bh * nq * d * b)
        else:
            split.add_write("OP", bh * nq * d * closed.STATS_BYTES)
        split.add_write("LSEP", bh * nq * closed.STATS_BYTES)
        longest = max(longest, rows)
    per_prog = nq * d * b + 2 * longest * d * b
    split_s, waves = _stream_time(s * bh, per_prog, hw)
    combine_s = 0.0
    if s > 1:
        comb.add_read("OP", bh * s * nq * d * closed.STATS_BYTES)
        comb.add_read("LSEP", bh * s * nq * closed.STATS_BYTES)
        comb.add_write("O", bh * nq * d * b)
        comb.add_write("LSE", bh * nq * closed.STATS_BYTES)
        combine_s, _ = _stream_time(bh, s * nq * (d + 1) * closed.STATS_BYTES + nq * d * b, hw)
    counters = {"split": split} if s == 1 else {"split": split, "combine": comb}
    return FlashDecodingResult(n, d, int(heads), int(batch), nq, s, str(dtype), hw, s * bh, waves,
                               min(s * bh, hw.num_sms) / hw.num_sms, counters, split_s, combine_s)
