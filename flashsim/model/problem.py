"""One attention problem, validated: sizes, blocks, dtype, device (chapter 02).

Every entry point (``flashsim.traffic``, ``flashsim.simulate``, the CLI, the widgets) builds a :class:`Problem` with
:func:`make_problem`, so bad input gets the same clear error everywhere, before any numpy call.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from flashsim.model.dtypes import canonical_dtype, dtype_bytes
from flashsim.errors import FlashsimError
from flashsim.model.hardware import Hardware, get_device

ALGORITHMS = ("naive", "eager", "flash1", "flash2")


@dataclass(frozen=True)
class Problem:
    """Attention over `batch` sequences of `heads` heads each: batch × heads independent (N, d) problems
    (:attr:`batch_heads`); counters are per problem (all of them)."""

    algo: str
    n: int
    d: int
    block_r: int | None  # rows of Q per block (Br); resolved for flash algorithms, None for naive/eager
    block_c: int | None  # rows of K/V per block (Bc = columns of S); vocabulary: flashsim.model.attention.visibility
    heads: int
    dtype: str  # storage dtype of Q, K, V, O, S, P, dO, ...
    stats_dtype: str  # storage dtype of the softmax statistics m, l, logsumexp, D
    causal: bool
    backward: bool  # True: counters cover forward + backward
    dropout_p: float
    hardware: Hardware
    batch: int = 1  # sequences B; each has `heads` heads H (the same B and H as the kernels' (B, H, N, d) tensors)

    @property
    def batch_heads(self) -> int:
        """B × H: the number of independent (N, d) attention problems that bytes and FLOPs are summed over."""
        return self.batch * self.heads

    @property
    def elem_bytes(self) -> int:
        return dtype_bytes(self.dtype)

    @property
    def stats_bytes(self) -> int:
        return dtype_bytes(self.stats_dtype)

    @property
    def sram_bytes(self) -> int:
        return self.hardware.sram_bytes

    def as_dict(self) -> dict:
        out = asdict(self)
        out["hardware"] = self.hardware.name
        out["sram_bytes"] = self.sram_bytes
        return out


#: an example of a valid value, named in the error of each integer argument
_EXAMPLES = {"batch": "batch=1 (sequences; heads=H per sequence)", "heads": "heads=16 (per sequence)",
             "block_r": "block_r=64 (or None: from SRAM)", "block_c": "block_c=64 (or None: from SRAM)",
             "sram_bytes": "sram_bytes=None (the device's own) or sram_bytes=65536"}


def _positive_int(name: str, value) -> int:
    example = _EXAMPLES.get(name, f"{name}=64")
    if isinstance(value, bool) or not isinstance(value, (int,)) and not (
            hasattr(value, "__index__") and not isinstance(value, float)):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise FlashsimError(f"{name}={value!r} must be a positive integer, e.g. {example}")
    value = int(value)
    if value <= 0:
        raise FlashsimError(f"{name}={value} must be a positive integer, e.g. {example}")
    return value


def strict_bool(name: str, value) -> bool:
    """True/False from a bool, a numpy bool or the integers 0 and 1; anything else (the string "False" included,
    which bool() reads as True) raises FlashsimError. The one rule for every flag of the model's API."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    hint = ""
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        hint = f" (a string: write {name}={value.strip().lower() == 'true'})"
    raise FlashsimError(f"{name}={value!r} must be True or False{hint}")


def make_problem(algo: str, n: int, d: int, block_r=None, block_c=None, heads: int = 1, dtype="fp16",
                 causal: bool = False, backward: bool = False, device="h200", sram_bytes=None,
                 stats_dtype=None, dropout_p: float = 0.0, *, batch: int = 1) -> Problem:
    """Validate arguments and build a Problem. Block sizes stay None here; the algorithm resolves defaults.

    batch: sequences B; heads: attention heads H per sequence. Only the product B × H enters the bytes and FLOPs.

    stats_dtype defaults to fp32 (what real kernels keep for m, l and the logsumexp); FA1's Fig. 2 counts them in
    fp16, so its reproduction passes stats_dtype="fp16".
    """
    algo = str(algo).lower()
    if algo not in ALGORITHMS:
        raise FlashsimError(f"unknown algo {algo!r}: use one of {list(ALGORITHMS)}")
    n = _positive_int("n", n)
    d = _positive_int("d", d)
    batch = _positive_int("batch", batch)
    heads = _positive_int("heads", heads)
    if block_r is not None:
        block_r = _positive_int("block_r", block_r)
    if block_c is not None:
        block_c = _positive_int("block_c", block_c)
    if sram_bytes is not None:
        sram_bytes = _positive_int("sram_bytes", sram_bytes)
    causal, backward = strict_bool("causal", causal), strict_bool("backward", backward)
    try:
        dropout_p = float(dropout_p)
    except (TypeError, ValueError):
        raise FlashsimError(f"dropout_p={dropout_p!r} must be a number in [0, 1), e.g. dropout_p=0.1") from None
    if not 0.0 <= dropout_p < 1.0:
        raise FlashsimError(f"dropout_p={dropout_p} must be in [0, 1), e.g. dropout_p=0.1")
    hardware = get_device(device, sram_bytes=sram_bytes)
    return Problem(algo, n, d, block_r, block_c, heads, canonical_dtype(dtype),
                   canonical_dtype(stats_dtype or "fp32"), causal, backward, dropout_p, hardware, batch)
