"""The simulated memory hierarchy: tensors in HBM, tiles in SRAM, every byte counted (chapters 01–03).

A :class:`Memory` holds named tensors in *HBM*. An algorithm moves tiles of them into *SRAM* with
:meth:`Memory.load`, computes on them, and moves results back with :meth:`Memory.store`. Each move adds its bytes
to :class:`Counters`, split into reads and writes and broken down by tensor (Q, K, V, O, S, P, m, l, dO, ...).
SRAM has a capacity: a tile set that does not fit raises :class:`~flashsim.errors.SramCapacityError`.

Every call also appends an :class:`Event` (load, store, compute or free) with its tile indices and bytes, so a
notebook slider can jump to step *i* of an algorithm. Events hold only tile-sized data (the running m and l of one
row block), never an N×N array: memory stays bounded for N ≤ 8192.

Numbers are stored in HBM rounded to the storage dtype (fp32, fp16 or bf16, see :mod:`flashsim.model.dtypes`) and all
arithmetic on tiles happens in fp32, as on a GPU's tensor cores with fp32 accumulation.

The optional L2 level lives in :mod:`flashsim.model.l2`: given the per-tensor requested bytes and a schedule of which
thread blocks run at once, it says how many bytes reach HBM (DRAM). These counters are the *requested* bytes,
what an ideal memory system without L2 would move.

>>> import numpy as np
>>> mem = Memory(sram_capacity_bytes=4096, dtype="fp16")
>>> mem.put("Q", np.ones((8, 4), np.float32))
>>> q = mem.load("Q", rows=slice(0, 4), tile=(0,))      # 4 rows x 4 cols x 2 bytes = 32 bytes
>>> mem.counters.hbm_read_bytes, mem.counters.read_bytes_by_tensor["Q"], mem.sram_in_use_bytes
(32, 32, 32)
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from flashsim.model.dtypes import canonical_dtype, dtype_bytes, round_to
from flashsim.errors import FlashsimError, MemoryBudgetError, SramCapacityError

#: host memory step mode may use before it refuses (chapter 05 explains why step mode is for small sizes)
DEFAULT_HOST_BUDGET_BYTES = 2 * 1024**3

#: storage dtype of 0/1 masks (a dropout keep-mask, a causal mask): 1 byte per element, values stored exactly
MASK_DTYPE = "bool"


def storage_dtype(dtype) -> str:
    """"fp32", "fp16", "bf16" or MASK_DTYPE ("bool"/"uint8"): the dtypes a tensor in HBM may have."""
    return MASK_DTYPE if str(dtype).replace("torch.", "").lower() in ("bool", "uint8", "u8") else canonical_dtype(dtype)


def storage_bytes(dtype) -> int:
    """Bytes per element of a storage dtype, masks included: storage_bytes("bool") == 1."""
    dt = storage_dtype(dtype)
    return 1 if dt == MASK_DTYPE else dtype_bytes(dt)


def _round_storage(x, dtype: str) -> np.ndarray:
    return (np.asarray(x) != 0).astype(np.float32) if dtype == MASK_DTYPE else round_to(x, dtype)


@dataclass
class Counters:
    """Bytes moved between HBM and SRAM, FLOPs done, and peak SRAM use.

    ``hbm_read_bytes`` counts HBM → SRAM, ``hbm_write_bytes`` SRAM → HBM. The ``*_by_tensor`` dicts split both by
    tensor name. Counters of independent heads add up: ``total = a + b``, ``per_batch = c * heads``.
    """

    hbm_read_bytes: int = 0
    hbm_write_bytes: int = 0
    read_bytes_by_tensor: dict = field(default_factory=lambda: defaultdict(int))
    write_bytes_by_tensor: dict = field(default_factory=lambda: defaultdict(int))
    flops: int = 0
    sram_peak_bytes: int = 0
    reuse_bytes: int = 0  # re-reads of a tile an ideal GEMM keeps on chip (load(..., count_once=True)): not HBM

    @property
    def hbm_bytes(self) -> int:
        """Reads plus writes."""
        return self.hbm_read_bytes + self.hbm_write_bytes

    def add_read(self, tensor: str, nbytes: int) -> None:
        self.hbm_read_bytes += int(nbytes)
        self.read_bytes_by_tensor[tensor] += int(nbytes)

    def add_write(self, tensor: str, nbytes: int) -> None:
        self.hbm_write_bytes += int(nbytes)
        self.write_bytes_by_tensor[tensor] += int(nbytes)

    def __add__(self, other: "Counters") -> "Counters":
        out = Counters(self.hbm_read_bytes + other.hbm_read_bytes, self.hbm_write_bytes + other.hbm_write_bytes,
                       flops=self.flops + other.flops,
                       sram_peak_bytes=max(self.sram_peak_bytes, other.sram_peak_bytes),
                       reuse_bytes=self.reuse_bytes + other.reuse_bytes)
        for src in (self, other):
            for k, v in src.read_bytes_by_tensor.items():
                out.read_bytes_by_tensor[k] += v
            for k, v in src.write_bytes_by_tensor.items():
                out.write_bytes_by_tensor[k] += v
        return out

    def __mul__(self, times: int) -> "Counters":
        """Counters of `times` independent copies (heads) run one after another: bytes and FLOPs scale, peak SRAM
        does not."""
        out = Counters(self.hbm_read_bytes * times, self.hbm_write_bytes * times, flops=self.flops * times,
                       sram_peak_bytes=self.sram_peak_bytes, reuse_bytes=self.reuse_bytes * times)
        out.read_bytes_by_tensor.update({k: v * times for k, v in self.read_bytes_by_tensor.items()})
        out.write_bytes_by_tensor.update({k: v * times for k, v in self.write_bytes_by_tensor.items()})
        return out

    __rmul__ = __mul__

    def __eq__(self, other) -> bool:
        if not isinstance(other, Counters):
            return NotImplemented
        return self.as_dict() == other.as_dict()

    def as_dict(self) -> dict:
        """Plain dict (JSON-ready), zero entries dropped from the per-tensor breakdowns."""
        return {
            "hbm_read_bytes": int(self.hbm_read_bytes),
            "hbm_write_bytes": int(self.hbm_write_bytes),
            "read_bytes_by_tensor": {k: int(v) for k, v in sorted(self.read_bytes_by_tensor.items()) if v},
            "write_bytes_by_tensor": {k: int(v) for k, v in sorted(self.write_bytes_by_tensor.items()) if v},
            "flops": int(self.flops),
            "sram_peak_bytes": int(self.sram_peak_bytes),
            "reuse_bytes": int(self.reuse_bytes),
        }


@dataclass(frozen=True)
class Event:
    """One step of an algorithm on the simulated hierarchy.

    kind: "load" (HBM → SRAM), "store" (SRAM → HBM), "compute" (on SRAM tiles) or "free" (SRAM released).
    tile: block indices, e.g. (i,) for row block i of Q or (i, j) for tile (i, j) of S.
    stats: small per-row-block state after the step, e.g. {"m": array(Br), "l": array(Br)} for online softmax.
    """

    index: int
    kind: str
    tensor: str
    tile: tuple = ()
    nbytes: int = 0
    flops: int = 0
    sram_in_use_bytes: int = 0
    note: str = ""
    stats: dict | None = None


def largest_fitting_block(bytes_for_block: Callable[[int], int], capacity_bytes: int, start: int = 1 << 14) -> int:
    """Largest power-of-two block b ≤ start with bytes_for_block(b) ≤ capacity_bytes (0 if even b=1 does not fit).

    >>> largest_fitting_block(lambda b: b * 1024, 100 * 1024)
    64
    """
    b = start
    while b >= 1:
        if bytes_for_block(b) <= capacity_bytes:
            return b
        b //= 2
    return 0


def check_tile_set_fits(tiles_bytes: dict, capacity_bytes: int, *, device_name: str = "SRAM",
                        fix: str = "") -> int:
    """Raise SramCapacityError unless the tiles (name → bytes) fit in `capacity_bytes`; return their total.

    The message names the bytes needed, the bytes available and `fix` (e.g. "use block_c ≤ 128").
    """
    needed = int(sum(tiles_bytes.values()))
    if needed > capacity_bytes:
        parts = ", ".join(f"{k} {_kib(v)}" for k, v in tiles_bytes.items())
        raise SramCapacityError(
            f"tile set needs {_kib(needed)} of SRAM ({parts}); {device_name} has {_kib(capacity_bytes)} per SM"
            + (f": {fix}" if fix else ""))
    return needed


def _kib(nbytes: int) -> str:
    return f"{nbytes / 1024:.4g} KiB" if nbytes < 1024**2 else f"{nbytes / 1024**2:.4g} MiB"


def check_host_budget(nbytes: int, budget_bytes: int = DEFAULT_HOST_BUDGET_BYTES, fix: str = "") -> None:
    """Refuse step mode when it would hold more than `budget_bytes` of host memory (use count mode instead)."""
    if nbytes > budget_bytes:
        raise MemoryBudgetError(
            f"step mode would need {_kib(nbytes)} of host memory, over the {_kib(budget_bytes)} budget: "
            + (fix or "use a smaller N or count mode (flashsim.traffic), which needs no numbers"))


class Memory:
    """HBM tensors + an SRAM with a capacity + counters + an event log (step mode).

    Parameters
    ----------
    sram_capacity_bytes : SRAM per thread block; loads beyond it raise SramCapacityError.
    dtype : default storage dtype of tensors put in HBM ("fp32", "fp16", "bf16").
    record_events : keep the Event log (a slider jumps to step i); set False for long runs.
    on_event : optional callback called with each Event as it happens.
    """

    def __init__(self, sram_capacity_bytes: int, dtype="fp16", *, record_events: bool = True,
                 on_event: Callable[[Event], None] | None = None):
        if sram_capacity_bytes <= 0:
            raise FlashsimError(f"sram_capacity_bytes={sram_capacity_bytes} must be positive")
        self.sram_capacity_bytes = int(sram_capacity_bytes)
        self.dtype = canonical_dtype(dtype)
        self.counters = Counters()
        self.events: list[Event] = []
        self.record_events = record_events
        self.on_event = on_event
        self._hbm: dict[str, np.ndarray] = {}
        self._hbm_dtype: dict[str, str] = {}
        self._sram: dict[str, int] = {}  # name in SRAM -> bytes
        self._seen_tiles: set = set()  # (tensor, tile) already loaded once, for count_once loads
        self._n_events = 0

    # --- HBM -------------------------------------------------------------------------------------------------
    def put(self, name: str, array: np.ndarray, dtype=None) -> None:
        """Place a tensor in HBM (rounded to its storage dtype). Not counted: inputs are already there."""
        dt = storage_dtype(dtype or self.dtype)
        self._hbm[name] = _round_storage(array, dt)
        self._hbm_dtype[name] = dt

    def empty(self, name: str, shape: tuple, dtype=None, fill: float = np.nan) -> None:
        """Allocate an output tensor in HBM (filled with NaN so a missing write shows). Not counted."""
        dt = storage_dtype(dtype or self.dtype)
        self._hbm[name] = np.full(shape, fill, np.float32)
        self._hbm_dtype[name] = dt

    def hbm(self, name: str) -> np.ndarray:
        """The tensor as HBM holds it (a view: reading it here is not counted)."""
        return self._hbm[name]

    def dtype_of(self, name: str) -> str:
        return self._hbm_dtype[name]

    # --- moves -----------------------------------------------------------------------------------------------
    def load(self, name: str, rows=slice(None), cols=slice(None), *, tile: tuple = (), as_name: str | None = None,
             note: str = "", stats: dict | None = None, count_once: bool = False) -> np.ndarray:
        """Copy hbm[name][rows, cols] into SRAM (counted as an HBM read) and return it as fp32.

        The SRAM copy is named `as_name` (default: "<name><tile>") and stays until :meth:`free`.
        count_once=True models an ideal GEMM library call (Algorithm 0's matmuls): the first load of a given
        (tensor, tile) is an HBM read, later loads of the same tile are counted in ``reuse_bytes`` instead.
        Call :meth:`forget_reuse` between ops.
        """
        src = self._hbm[name]
        block = src[rows] if src.ndim == 1 else src[rows, cols]
        nbytes = block.size * storage_bytes(self._hbm_dtype[name])
        self._alloc(as_name or f"{name}{tile}", nbytes)
        key = (name, tuple(tile))
        if count_once and key in self._seen_tiles:
            self.counters.reuse_bytes += nbytes
            self._emit("load", name, tile, 0, note=(note + " (reused on chip)").strip(), stats=stats)
        else:
            if count_once:
                self._seen_tiles.add(key)
            self.counters.add_read(name, nbytes)
            self._emit("load", name, tile, nbytes, note=note, stats=stats)
        return block.astype(np.float32, copy=True)

    def store(self, name: str, value: np.ndarray, rows=slice(None), cols=slice(None), *, tile: tuple = (),
              note: str = "", stats: dict | None = None) -> None:
        """Write `value` (an SRAM tile) to hbm[name][rows, cols], rounded to the tensor's dtype (an HBM write)."""
        dst = self._hbm[name]
        dt = self._hbm_dtype[name]
        value = _round_storage(value, dt)
        if dst.ndim == 1:
            dst[rows] = value
            nbytes = dst[rows].size * storage_bytes(dt)
        else:
            dst[rows, cols] = value
            nbytes = dst[rows, cols].size * storage_bytes(dt)
        self.counters.add_write(name, nbytes)
        self._emit("store", name, tile, nbytes, note=note, stats=stats)

    def scratch(self, name: str, nbytes: int, *, note: str = "") -> None:
        """Reserve SRAM for an on-chip intermediate (e.g. the S tile) that never touches HBM."""
        self._alloc(name, int(nbytes))

    def compute(self, flops: int, *, tensor: str = "", tile: tuple = (), note: str = "",
                stats: dict | None = None) -> None:
        """Record on-chip arithmetic (no HBM traffic)."""
        self.counters.flops += int(flops)
        self._emit("compute", tensor, tile, 0, flops=int(flops), note=note, stats=stats)

    def free(self, *names: str) -> None:
        """Release SRAM copies by name (unknown names are ignored, so a loop can free unconditionally)."""
        for n in names:
            nbytes = self._sram.pop(n, 0)
            if nbytes:
                self._emit("free", n, (), nbytes)

    def free_all(self) -> None:
        self.free(*list(self._sram))

    def forget_reuse(self) -> None:
        """End of a GEMM op: tiles loaded with count_once=True are no longer considered on chip."""
        self._seen_tiles.clear()

    @property
    def sram_in_use_bytes(self) -> int:
        return sum(self._sram.values())

    # --- internals -------------------------------------------------------------------------------------------
    def _alloc(self, name: str, nbytes: int) -> None:
        in_use = self.sram_in_use_bytes - self._sram.get(name, 0) + nbytes
        if in_use > self.sram_capacity_bytes:
            held = ", ".join(f"{k} {_kib(v)}" for k, v in self._sram.items()) or "nothing"
            raise SramCapacityError(
                f"SRAM overflow loading {name} ({_kib(nbytes)}): {_kib(in_use)} needed, "
                f"{_kib(self.sram_capacity_bytes)} available (holding {held}): use smaller blocks")
        self._sram[name] = nbytes
        self.counters.sram_peak_bytes = max(self.counters.sram_peak_bytes, in_use)

    def _emit(self, kind, tensor, tile, nbytes, *, flops=0, note="", stats=None) -> None:
        ev = Event(self._n_events, kind, tensor, tuple(tile), int(nbytes), flops, self.sram_in_use_bytes, note,
                   stats)
        self._n_events += 1
        if self.record_events:
            self.events.append(ev)
        if self.on_event is not None:
            self.on_event(ev)
