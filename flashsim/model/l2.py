"""An analytic L2 model: which requested bytes reach DRAM (used by the kernel view, chapter 09).

Signature (small and general, so the simulator core can reuse it)::

    simulate_l2(programs, l2_bytes, concurrency, *, flush_writes=True, shared_cost=1.0,
                protected_fraction=None, private_cost=1.0, write_cost=1.0, dirty_limit=None,
                dirty_mix=None) -> L2Result

``programs`` is a sequence, in launch order, of programs (thread blocks); each program is a sequence of
:class:`Access` ``(key, nbytes, is_write)`` made in program order. ``key`` names a tile (any hashable, e.g.
``("K", head, row0)``); two accesses with the same key touch the same bytes.

Concurrency model (stated, not measured):

* Programs are issued in launch order (grid axis 0 fastest, as CUDA dispatches blocks). ``concurrency`` of them
  are resident at once (``num_sms × programs_per_sm``); when one finishes, the next in launch order takes its
  slot.
* Resident programs advance in lockstep: each round, every resident program makes its next access, in slot
  order. So tiles that concurrent programs share (K/V tiles of one head in FlashAttention) are touched close
  together in time.
* L2 is one fully associative LRU cache of ``l2_bytes`` (tile granular). A read hits if its tile is resident,
  i.e. if the unique bytes touched since its last use (its reuse window) fit in ``l2_bytes``; otherwise it is
  read from DRAM. Writes allocate in L2 without a DRAM read (whole tiles are written) and mark the tile dirty.
* With ``protected_fraction`` the LRU is segmented (SLRU): a tile a read brings in waits on probation; a second
  use, or a write, moves it to the protected segment (at most ``protected_fraction × l2_bytes``; its oldest
  tiles fall back to probation); evictions take the oldest tile on probation first. So a stream read once (Q in
  FlashAttention, S in the softmax of naive attention) does not push out tiles in reuse (K/V) or just written
  (O, P), which is what the H200 shows: its L2 keeps written data over data read once.
* The L2 is write-back: a dirty tile reaches DRAM when it is evicted. With ``dirty_limit`` (bytes) at most that
  many bytes stay dirty: past it the tile dirty longest is written back and stays in the L2, clean (a write
  stream on the H200 leaves 26-28 MiB of its 60 MiB dirty); with ``dirty_mix`` that limit shrinks as the share of
  reads among the L2's recent fills grows (a launch streaming two bytes read per byte written leaves about 18 MiB
  of the H200's L2 dirty). With ``flush_writes=True`` the tiles still
  dirty at the end of the launch are counted as written too (every byte written reaches DRAM once); with
  ``flush_writes=False`` they are not (Nsight Compute's measurement of one kernel ends before they leave). Either
  way ``L2Result.dirty_end_bytes`` says how many were left.
* Each launch starts cold (Nsight Compute flushes caches before each profiled kernel, ``--cache-control all``).

Not modelled: set conflicts, the real replacement policy, sector (32 B) granularity of partially used lines,
prefetch, programs drifting out of lockstep, and the real L2 writing back part of a small written set while a
read-once stream passes (it is no strict LRU: the naive P V kernel's O). So the model overestimates DRAM reads where
(1) resident programs start at staggered times and stream the same tiles (real programs that hit in L2 run faster
and catch up with the ones ahead: why the kernels launch their longest programs first) and (2) a stream is just over
the modelled capacity (a strict LRU loses all of it, the real L2 only part); measured in chapter 09's ncu sweep
(the course's recorded ``kernels_h200``). The H100/H200 L2's split into two partitions (lines all SMs read are kept
in both) is modelled by a capacity of a bit under half the L2 and per-tile costs (``shared_cost``, ``private_cost``,
``write_cost``: what a tile several programs touch, one program only reads, one program writes occupies per byte).
:func:`flashsim.model.kernel_io.kernel_dram` takes their values, the protected share and the dirty limit from the
calibration table, :mod:`flashsim.model.calibration`.

Callers: :func:`flashsim.model.kernel_io.kernel_dram` builds the tile traces of the Triton kernels and calls this;
the simulator core can pass its own traces (any hashable keys).

>>> progs = [[Access(("K", 0), 100, False)], [Access(("K", 0), 100, False)]]
>>> simulate_l2(progs, l2_bytes=1000, concurrency=1).dram_read_bytes
100
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Hashable, Iterable, NamedTuple, Sequence


class Access(NamedTuple):
    """One tile access of a program: ``nbytes`` of tile ``key``, a read unless ``is_write``."""
    key: Hashable
    nbytes: int
    is_write: bool = False


@dataclass
class L2Result:
    """Bytes requested from L2 and bytes that reached DRAM, for one launch (or a sum of launches).

    ``dirty_end_bytes``: dirty bytes still in the L2 when the launch ends (counted in ``dram_write_bytes`` with
    ``flush_writes=True``, not with False), so one replay gives both: written during the launch
    (``dram_write_bytes - dirty_end_bytes`` with True) and written in all (``dram_write_bytes + dirty_end_bytes``
    with False)."""
    requested_read_bytes: int = 0
    requested_write_bytes: int = 0
    dram_read_bytes: int = 0
    dram_write_bytes: int = 0
    dirty_end_bytes: int = 0

    @property
    def dram_bytes(self) -> int:
        return self.dram_read_bytes + self.dram_write_bytes

    @property
    def hit_rate(self) -> float:
        req = self.requested_read_bytes
        return 1.0 - self.dram_read_bytes / req if req else 0.0

    def __add__(self, other: "L2Result") -> "L2Result":
        return L2Result(self.requested_read_bytes + other.requested_read_bytes,
                        self.requested_write_bytes + other.requested_write_bytes,
                        self.dram_read_bytes + other.dram_read_bytes,
                        self.dram_write_bytes + other.dram_write_bytes,
                        self.dirty_end_bytes + other.dirty_end_bytes)


@dataclass(slots=True)
class _Entry:
    """A tile in the L2: its bytes, whether it is dirty, and the capacity it occupies (bytes × its tile cost)."""
    nbytes: int
    dirty: bool
    capacity: float


def _evict(key, entry: _Entry, dirty: "_DirtyLimit", res: L2Result) -> float:
    """``entry`` leaves the L2 (both simulators' eviction step): a dirty tile is written back to DRAM. Returns the
    capacity it frees."""
    if entry.dirty:
        dirty.evicted(key, entry)
        res.dram_write_bytes += entry.nbytes
    return entry.capacity


def _finish(res: L2Result, entries: Iterable[_Entry], flush_writes: bool) -> L2Result:
    """End of the launch: the dirty bytes still in the L2, written to DRAM too with ``flush_writes``."""
    res.dirty_end_bytes = sum(e.nbytes for e in entries if e.dirty)
    if flush_writes:
        res.dram_write_bytes += res.dirty_end_bytes
    return res


def _tile_costs(programs: list, shared_cost: float, private_cost: float, write_cost: float) -> dict:
    """{key: L2 capacity per byte} of the tiles whose cost is not 1: ``shared_cost`` for a tile more than one
    program touches, else ``write_cost`` for a tile its one program writes, else ``private_cost``."""
    owner: dict = {}
    shared: set = set()
    written: set = set()
    for pi, prog in enumerate(programs):
        for acc in prog:
            if owner.setdefault(acc.key, pi) != pi:
                shared.add(acc.key)
            if acc.is_write:
                written.add(acc.key)
    cost = {}
    for key in owner:
        c = shared_cost if key in shared else (write_cost if key in written else private_cost)
        if c != 1.0:
            cost[key] = c
    return cost


def simulate_l2(programs: Iterable[Sequence[Access]], l2_bytes: int, concurrency: int, *,
                flush_writes: bool = True, shared_cost: float = 1.0,
                protected_fraction: float | None = None, private_cost: float = 1.0,
                write_cost: float = 1.0, dirty_limit: int | None = None,
                dirty_mix: tuple | None = None) -> L2Result:
    """DRAM bytes of one launch under the concurrency model in the module docstring.

    ``shared_cost``: L2 capacity a tile read by more than one program occupies, per byte (2.0 models an L2 split
    in two partitions that each keep a copy of lines all SMs read; tiles one program touches cost 1.0).
    ``private_cost`` and ``write_cost``: the same for a tile only one program touches (read only; written). With
    all three 1.0 every byte costs 1 (the default).
    ``protected_fraction``: None = one LRU; a number in (0, 1] = the segmented LRU of the module docstring.
    ``dirty_limit``: None = any number of dirty bytes; else the most bytes that stay dirty (past it, the tiles dirty
    longest are written back to DRAM and stay, clean). ``dirty_mix = (c0, c1)``: that limit scaled by
    ``min(1, c0 + c1 × w)``, ``w`` the write share of the last ``l2_bytes`` filled (:class:`_DirtyLimit`).
    """
    if l2_bytes <= 0 or concurrency < 1:
        raise ValueError("l2_bytes must be > 0 and concurrency >= 1")
    if min(shared_cost, private_cost, write_cost) <= 0:
        raise ValueError("shared_cost, private_cost and write_cost must be > 0")
    if dirty_limit is not None and dirty_limit < 0:
        raise ValueError(f"dirty_limit={dirty_limit!r} must be >= 0, or None for no limit")
    if dirty_mix is not None and (len(dirty_mix) != 2 or min(dirty_mix) < 0):
        raise ValueError(f"dirty_mix={dirty_mix!r} must be two numbers >= 0 (c0, c1), or None")
    costed = (shared_cost, private_cost, write_cost) != (1.0, 1.0, 1.0)
    if costed:
        programs = [list(prog) for prog in programs]  # read twice: who touches each tile, then the replay
    cost = _tile_costs(programs, shared_cost, private_cost, write_cost) if costed else {}
    if protected_fraction is not None:
        if not 0 < protected_fraction <= 1:
            raise ValueError(f"protected_fraction={protected_fraction!r} must be in (0, 1], or None for one LRU")
        return _simulate_slru(programs, l2_bytes, concurrency, flush_writes, protected_fraction, cost,
                              _DirtyLimit(dirty_limit, dirty_mix, l2_bytes))
    programs = list(programs)  # programs may be generators: they are consumed once, in launch order
    cache: OrderedDict = OrderedDict()      # key -> _Entry, oldest first
    dirty = _DirtyLimit(dirty_limit, dirty_mix, l2_bytes)
    used = 0
    res = L2Result()
    for key, nbytes, is_write in _resident(programs, concurrency):
        entry = cache.get(key)
        if is_write:
            res.requested_write_bytes += nbytes
            if entry is None:
                c = nbytes * cost.get(key, 1.0)
                cache[key] = entry = _Entry(nbytes, False, c)
                used += c
            else:
                cache.move_to_end(key)
            dirty.mark(key, entry)
        else:
            res.requested_read_bytes += nbytes
            if entry is None:
                res.dram_read_bytes += nbytes
                dirty.fill(nbytes, False)
                c = nbytes * cost.get(key, 1.0)
                cache[key] = _Entry(nbytes, False, c)
                used += c
            else:
                cache.move_to_end(key)
        while used > l2_bytes and cache:
            used -= _evict(*cache.popitem(last=False), dirty, res)
        res.dram_write_bytes += dirty.clean_excess()
    return _finish(res, cache.values(), flush_writes)


class _DirtyLimit:
    """The dirty tiles in the order they became dirty, and their bytes: past the limit the oldest are written back
    and stay in the L2, clean (the simulators' :class:`_Entry` objects, shared with the cache).

    The limit is ``limit`` bytes (None = no limit), or with ``mix = (c0, c1)`` ``limit × min(1, c0 + c1 × w)``,
    where ``w`` is the write share of the L2's recent fills (:meth:`fill`: bytes read from DRAM, bytes newly made
    dirty), averaged over the last ``window`` bytes filled: a launch that streams reads past its writes keeps fewer
    of them dirty."""

    def __init__(self, limit, mix: tuple | None = None, window: float = 1.0):
        self.limit = limit
        self.cap = limit
        self.mix = None if limit is None else mix
        self.window = float(window)
        self.write_share = None
        self.order: OrderedDict = OrderedDict()
        self.bytes = 0

    def fill(self, nbytes: int, is_write: bool) -> None:
        """``nbytes`` came into the L2 from DRAM (a read), or became dirty (a write): the write share moves."""
        if self.mix is None:
            return
        x = 1.0 if is_write else 0.0
        if self.write_share is None:
            self.write_share = x
        else:
            self.write_share += (x - self.write_share) * min(1.0, nbytes / self.window)
        c0, c1 = self.mix
        self.limit = self.cap * min(1.0, c0 + c1 * self.write_share)

    def mark(self, key, entry) -> None:
        """``entry`` written: dirty from now on."""
        if not entry.dirty:
            entry.dirty = True
            self.fill(entry.nbytes, True)
            if self.limit is not None:
                self.order[key] = entry
                self.bytes += entry.nbytes

    def evicted(self, key, entry) -> None:
        """A dirty ``entry`` left the L2 (written back by the caller)."""
        if self.limit is not None and self.order.pop(key, None) is not None:
            self.bytes -= entry.nbytes

    def clean_excess(self) -> int:
        """Write back the oldest dirty tiles while more than the limit are dirty: the bytes written."""
        written = 0
        while self.limit is not None and self.bytes > self.limit and self.order:
            _, e = self.order.popitem(last=False)
            e.dirty = False
            self.bytes -= e.nbytes
            written += e.nbytes
        return written


def _resident(programs, concurrency: int):
    """The accesses of ``programs`` in the order the concurrency model makes them (lockstep rounds over the
    resident programs, the next program taking a finished one's slot)."""
    pending = iter(programs)
    slots: list = []
    exhausted = False
    while True:
        while not exhausted and len(slots) < concurrency:
            nxt = next(pending, None)
            if nxt is None:
                exhausted = True
                break
            slots.append(iter(nxt))
        if not slots:
            return
        alive = []
        for prog in slots:
            acc = next(prog, None)
            if acc is not None:
                alive.append(prog)
                yield acc
        slots[:] = alive


def _simulate_slru(programs, l2_bytes: int, concurrency: int, flush_writes: bool, protected_fraction: float,
                   cost: dict | None = None, dirty: "_DirtyLimit | None" = None):
    """simulate_l2 with the segmented LRU: probation and protected segments of :class:`_Entry` (capacity = nbytes x
    the tile's cost, ``cost``: {key: per-byte cost}, 1 where absent)."""
    cost = cost or {}
    probation: OrderedDict = OrderedDict()
    protected: OrderedDict = OrderedDict()
    dirty = dirty or _DirtyLimit(None)
    cap_protected = protected_fraction * l2_bytes
    used = used_protected = 0
    res = L2Result()
    for key, nbytes, is_write in _resident(programs, concurrency):
        if is_write:
            res.requested_write_bytes += nbytes
        else:
            res.requested_read_bytes += nbytes
        entry = protected.get(key)
        if entry is not None:                        # in reuse: stays protected, newest
            if is_write:
                dirty.mark(key, entry)
            protected.move_to_end(key)
            res.dram_write_bytes += dirty.clean_excess()
            continue
        entry = probation.pop(key, None)
        if entry is None:                            # a miss: read from DRAM (a write allocates without a read)
            c = nbytes * cost.get(key, 1.0)
            used += c
            if not is_write:
                res.dram_read_bytes += nbytes
                dirty.fill(nbytes, False)
                probation[key] = _Entry(nbytes, False, c)
            else:
                entry = _Entry(nbytes, False, c)
        if entry is not None:                        # a second use, or a write: protected
            if is_write:
                dirty.mark(key, entry)
            protected[key] = entry
            used_protected += entry.capacity
            while used_protected > cap_protected and protected:
                k, e = protected.popitem(last=False)
                used_protected -= e.capacity
                probation[k] = e
        while used > l2_bytes and (probation or protected):
            if probation:
                k, e = probation.popitem(last=False)
            else:
                k, e = protected.popitem(last=False)
                used_protected -= e.capacity
            used -= _evict(k, e, dirty, res)
        res.dram_write_bytes += dirty.clean_excess()
    return _finish(res, [e for seg in (probation, protected) for e in seg.values()], flush_writes)
