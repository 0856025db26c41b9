"""An analytic L2 model: which requested bytes reach DRAM (used by the kernel view, chapter 09).

Signature (small and general, so the simulator core can reuse it)::

    simulate_l2(programs, l2_bytes, concurrency, *, flush_writes=True, shared_cost=1.0) -> L2Result

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
* Writes reach DRAM once: a dirty tile is written back when evicted, and with ``flush_writes=True`` the tiles
  still dirty at the end of the launch are counted as written too (every byte written reaches DRAM once).
* Each launch starts cold (Nsight Compute flushes caches before each profiled kernel, ``--cache-control all``).

Not modelled: set conflicts, the real replacement policy, sector (32 B) granularity of partially used lines,
prefetch, and programs drifting out of lockstep. So the model overestimates DRAM reads where (1) resident programs
start at staggered times and stream the same tiles (real programs that hit in L2 run faster and catch up with the
ones ahead: why the kernels launch their longest programs first) and (2) a stream is just over the modelled
capacity (a strict LRU loses all of it, the real L2 only part); measured, see
benchmarks/results/kernels_h200_2026-11-30.md. The H100/H200 L2's split into two partitions (lines all SMs read are
kept in both) can be modelled two ways: pass half the L2 as ``l2_bytes`` (what
:func:`flashsim.model.kernel_io.kernel_dram` does by default) or ``shared_cost=2.0`` (a tile more than one program
touches occupies twice its bytes).

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
    """Bytes requested from L2 and bytes that reached DRAM, for one launch (or a sum of launches)."""
    requested_read_bytes: int = 0
    requested_write_bytes: int = 0
    dram_read_bytes: int = 0
    dram_write_bytes: int = 0

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
                        self.dram_write_bytes + other.dram_write_bytes)


def simulate_l2(programs: Iterable[Sequence[Access]], l2_bytes: int, concurrency: int, *,
                flush_writes: bool = True, shared_cost: float = 1.0) -> L2Result:
    """DRAM bytes of one launch under the concurrency model in the module docstring.

    ``shared_cost``: L2 capacity a tile read by more than one program occupies, per byte (2.0 models an L2 split
    in two partitions that each keep a copy of lines all SMs read; tiles one program touches cost 1.0).
    """
    if l2_bytes <= 0 or concurrency < 1:
        raise ValueError("l2_bytes must be > 0 and concurrency >= 1")
    programs = list(programs)  # programs may be generators: they are consumed once, in launch order
    cost: dict = {}
    if shared_cost != 1.0:
        programs = [list(prog) for prog in programs]  # read twice: who owns each tile, then the replay
        owner: dict = {}
        for pi, prog in enumerate(programs):
            for acc in prog:
                o = owner.setdefault(acc.key, pi)
                if o != pi:
                    cost[acc.key] = shared_cost
    cache: OrderedDict = OrderedDict()      # key -> [nbytes, dirty]
    used = 0
    res = L2Result()
    pending = iter(programs)
    slots: list = []
    exhausted = False

    def refill():
        nonlocal exhausted
        while not exhausted and len(slots) < concurrency:
            nxt = next(pending, None)
            if nxt is None:
                exhausted = True
                return
            slots.append(iter(nxt))

    refill()
    while slots:
        alive = []
        for prog in slots:
            acc = next(prog, None)
            if acc is None:
                continue
            alive.append(prog)
            key, nbytes, is_write = acc
            entry = cache.get(key)
            if is_write:
                res.requested_write_bytes += nbytes
                if entry is None:
                    c = nbytes * cost.get(key, 1.0)
                    cache[key] = [nbytes, True, c]
                    used += c
                else:
                    entry[1] = True
                    cache.move_to_end(key)
            else:
                res.requested_read_bytes += nbytes
                if entry is None:
                    res.dram_read_bytes += nbytes
                    c = nbytes * cost.get(key, 1.0)
                    cache[key] = [nbytes, False, c]
                    used += c
                else:
                    cache.move_to_end(key)
            while used > l2_bytes and cache:
                _, (b, dirty, c) = cache.popitem(last=False)
                used -= c
                if dirty:
                    res.dram_write_bytes += b
        slots[:] = alive
        refill()
    if flush_writes:
        res.dram_write_bytes += sum(b for b, dirty, _ in cache.values() if dirty)
    return res
