"""Step mode: FlashAttention on real numbers through the simulated memory, one Event per move (chapters 05, 07, 08).

:func:`run_flash` runs every head through its own :class:`~flashsim.model.memory.Memory` (head 0's keeps the
Event log): the forward of :mod:`.forward` and, when asked, the backward of :mod:`.backward`. Storage dtypes are
emulated by rounding on store; every tile computation is fp32. No N×N array is ever built. Its counters equal
count mode's (:func:`flashsim.model.attention.flash.count.count_flash`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flashsim.errors import FlashsimError
from flashsim.model.attention.flash.backward import flash_backward
from flashsim.model.attention.flash.blocks import effective_peak, resolve_blocks
from flashsim.model.attention.flash.count import FlashCount
from flashsim.model.attention.flash.forward import flash1_forward, flash2_forward
from flashsim.model.attention.flash.stepper import TileStepper
from flashsim.model.attention.visibility import n_blocks
from flashsim.model.blas import single_blas_thread
from flashsim.model.memory import Counters, Memory, check_host_budget

#: step mode keeps the O rows of the row block in each compute Event only while their total stays under this
EVENT_O_BUDGET_BYTES = 64 * 1024**2


@dataclass
class FlashRun(FlashCount):
    """Step-mode result: the counters plus the numbers, and head 0's Memory with its Event log."""

    out: np.ndarray | None = None  # (B·H, N, d) float32, as stored in HBM (rounded to the storage dtype)
    lse: np.ndarray | None = None  # (B·H, N) float32 logsumexp m + log l
    grads: tuple | None = None  # (dq, dk, dv), each (B·H, N, d) float32, when backward
    memory: Memory | None = None  # head 0


def _as_heads(name: str, x, heads: int, n: int, d: int) -> np.ndarray:
    if x is None:
        raise FlashsimError(f"{name} is required (an array of shape (batch × heads, N, d) = ({heads}, {n}, {d}))")
    a = np.asarray(x, dtype=np.float32)
    if a.ndim == 2 and heads == 1:
        a = a[None]
    if a.shape != (heads, n, d):
        raise FlashsimError(f"{name} has shape {np.shape(x)}: expected (batch × heads, N, d) = ({heads}, {n}, {d})")
    return a


def step_host_bytes(problem, br: int, bc: int, record_events: bool = True) -> int:
    """Host memory step mode needs (an estimate, for the budget check): one head's HBM tensors (fp32), the outputs
    of all heads, and head 0's event log: about 16 events of ~500 bytes per tile per phase, plus the m, l rows."""
    n, d, h = problem.n, problem.d, problem.batch_heads
    tensors = (12 if problem.backward else 6) * n * d * 4 + 4 * n * 4
    outputs = h * (4 if problem.backward else 1) * n * d * 4 + h * n * 4
    tiles = n_blocks(n, br) * n_blocks(n, bc) * (2 if problem.backward else 1)
    events = tiles * (16 * 500 + 2 * min(br, n) * 4) if record_events else 0
    return tensors + outputs + events


def run_flash(problem, q, k, v, do=None, memory: Memory | None = None, record_events: bool = True,
              on_event=None) -> FlashRun:
    """Step mode: run flash1/flash2 (forward, + backward when problem.backward) on real numbers.

    q, k, v (and do for the backward): float arrays (B·H, N, d), the problem's batch × heads independent heads
    ((N, d) accepted when B·H == 1). Every head runs through a Memory; head 0's keeps its Event log
    (record_events) and is returned as ``.memory``. Pass `memory` to supply head 0's Memory yourself (e.g. with an
    on_event callback); its capacity should be the problem's SRAM. on_event: a callback given every Event of the
    heads in Memories made here (simulate's progress bar).
    """
    br, bc = resolve_blocks(problem)
    n, d, h = problem.n, problem.d, problem.batch_heads
    check_host_budget(step_host_bytes(problem, br, bc, record_events),
                      fix="use " + ("record_events=False (no event log), " if record_events else "")
                          + "larger blocks, a smaller N, or count mode (count_flash / flashsim.traffic), which "
                          "needs no numbers")
    q, k, v = (_as_heads(nm, x, h, n, d) for nm, x in (("q", q), ("k", k), ("v", v)))
    if problem.backward:
        do = _as_heads("do", do, h, n, d)
    tiles = n_blocks(n, br) * n_blocks(n, bc)
    keep_o = record_events and tiles * min(br, n) * d * 4 <= EVENT_O_BUDGET_BYTES
    out = np.empty((h, n, d), np.float32)
    lse = np.empty((h, n), np.float32)
    grads = tuple(np.empty((h, n, d), np.float32) for _ in range(3)) if problem.backward else None
    with single_blas_thread():
        fwd_total, bwd_total, mem0 = _run_heads(problem, br, bc, q, k, v, do, memory, record_events, keep_o,
                                                out, lse, grads, on_event)
    total = fwd_total + bwd_total if bwd_total is not None else fwd_total * 1
    init = n * d * problem.elem_bytes + 2 * n * problem.stats_bytes if problem.algo == "flash1" else 0
    if problem.backward:
        init += n * d * problem.elem_bytes
    _, tiles_set = effective_peak(problem, br, bc)
    return FlashRun(problem, br, bc, total, fwd_total, bwd_total, init * h, tiles_set,
                    out=out, lse=lse, grads=grads, memory=mem0)


def _run_heads(problem, br, bc, q, k, v, do, memory, record_events, keep_o, out, lse, grads, on_event=None):
    """Every head through its own Memory (head 0's keeps the event log); returns summed counters and Memory 0."""
    fwd_total = bwd_total = mem0 = None
    for head in range(problem.batch_heads):
        if head == 0 and memory is not None:
            mem = memory
        else:
            mem = Memory(problem.sram_bytes, problem.dtype, record_events=record_events and head == 0,
                         on_event=on_event)
        for name, x in (("Q", q[head]), ("K", k[head]), ("V", v[head])):
            mem.put(name, x)
        st = TileStepper(mem, problem, br, bc, keep_o and head == 0)
        mem.counters = Counters()
        if problem.algo == "flash1":
            flash1_forward(st)
            m, l = mem.hbm("m"), mem.hbm("l")
            with np.errstate(divide="ignore"):
                lse[head] = m + np.log(l)
        else:
            flash2_forward(st)
            lse[head] = mem.hbm("L")
        out[head] = mem.hbm("O")
        fwd = mem.counters
        bwd = None
        if problem.backward:
            mem.put("dO", do[head])
            mem.counters = Counters()
            flash_backward(st, problem.algo)
            bwd = mem.counters
            for g, name in zip(grads, ("dQ", "dK", "dV")):
                g[head] = mem.hbm(name)
            mem.counters = fwd + bwd
        fwd_total = fwd if fwd_total is None else fwd_total + fwd
        if bwd is not None:
            bwd_total = bwd if bwd_total is None else bwd_total + bwd
        if head == 0:
            mem0 = mem
    return fwd_total, bwd_total, mem0
