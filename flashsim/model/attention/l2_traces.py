"""The L2 traces of the simulated algorithms: which requested bytes reach DRAM (chapter 09).

Count and step mode's counters are *requested* bytes (HBM <-> SRAM with no cache in between). dram_bytes() replays each
kernel launch of the algorithm as a trace of tile accesses through flashsim.model.l2.simulate_l2 (its docstring
states the concurrency model: programs in launch order, `num_sms` resident at once, advancing in lockstep,
one LRU L2 of the preset's size, each launch starting cold). The programs (thread blocks) are:

  flash2 forward      one per (head, row block i), i fastest: Q_i, then K_j, V_j per visible j; writes O_i, L_i
  flash1 forward      one per head (Algorithm 1's loops): per j: K_j, V_j; per visible i: Q_i, O_i, l_i, m_i
                      read and O_i, l_i, m_i written
  flash2 preprocess   one per (head, i): O_i, dO_i read, D_i written
  flash backward      flash2: one per (head, column block j); flash1: one per head looping over j. Per visible
                      tile: Q_i, dO_i, dQ_i and the statistics read, dQ_i written; dK_j, dV_j written at the end
  naive / eager       one launch per op, one program per head touching whole tensors (each op reads each tile
                      once already); the causal mask is one tensor broadcast over heads, so it hits in L2

"Head" here is one of the problem's batch × heads independent (N, d) problems (B·H, ``problem.batch_heads``). They
are independent and identical, so only the first `heads_sim` of them (enough for a few waves of resident programs)
are replayed and the result is scaled by B·H / heads_sim; the scaled requested bytes equal the counters exactly
whenever heads_sim divides B·H (tests check requested == counters).

:func:`dram_bytes` is what ``traffic(..., l2=True)`` and ``simulate(..., l2=True)`` report. (The Triton kernels'
own traces, as the kernels issue them, are :func:`flashsim.model.kernel_io.kernel_trace`.)
"""
from __future__ import annotations

from flashsim.errors import FlashsimError
from flashsim.model.attention.visibility import (block_sizes, first_visible_row_block, n_blocks, visible_col_blocks,
                                                 visible_tiles)
from flashsim.model.l2 import Access, L2Result, simulate_l2
from flashsim.model.memory import storage_bytes
from flashsim.model.problem import Problem

__all__ = ["dram_bytes"]


def _l2_heads(programs_per_head: int, concurrency: int, heads: int) -> int:
    waves = 3 * concurrency  # programs in three full waves
    return max(1, min(heads, -(-waves // max(1, programs_per_head))))


def _flash_launches(problem: Problem, br: int, bc: int, heads: int) -> list:
    """Per launch, a list of programs (lists of l2.Access) for `heads` heads of a flash problem."""
    n, d, b, bs, algo = problem.n, problem.d, problem.elem_bytes, problem.stats_bytes, problem.algo
    tr, tc = n_blocks(n, br), n_blocks(n, bc)
    rows = block_sizes(n, br).tolist()
    cols = block_sizes(n, bc).tolist()

    def visible(i):  # K/V blocks row block i computes
        return range(visible_col_blocks(i, br, bc, n, problem.causal))

    def first_row(j):  # first Q block that sees K/V block j
        return first_visible_row_block(j, br, bc, problem.causal)

    def rd(key, nbytes):
        return Access(key, nbytes, False)

    def wr(key, nbytes):
        return Access(key, nbytes, True)

    # launches are lists of programs and programs are generators: the replay holds only the cache and the
    # resident programs, never the whole trace (its memory does not grow with the number of tiles)
    def flash2_forward(h, i):
        yield rd(("Q", h, i), rows[i] * d * b)
        for j in visible(i):
            yield rd(("K", h, j), cols[j] * d * b)
            yield rd(("V", h, j), cols[j] * d * b)
        yield wr(("O", h, i), rows[i] * d * b)
        yield wr(("L", h, i), rows[i] * bs)

    def flash1_forward(h):
        for j in range(tc):
            yield rd(("K", h, j), cols[j] * d * b)
            yield rd(("V", h, j), cols[j] * d * b)
            for i in range(first_row(j), tr):
                r = rows[i]
                yield from (rd(("Q", h, i), r * d * b), rd(("O", h, i), r * d * b), rd(("l", h, i), r * bs),
                            rd(("m", h, i), r * bs), wr(("O", h, i), r * d * b), wr(("l", h, i), r * bs),
                            wr(("m", h, i), r * bs))

    launches = []
    if algo == "flash2":
        launches.append([flash2_forward(h, i) for h in range(heads) for i in range(tr)])
    else:
        launches.append([flash1_forward(h) for h in range(heads)])
    if problem.backward:
        stats = ["L", "D"] if algo == "flash2" else ["m", "l"]
        if algo == "flash2":
            launches.append([iter([rd(("O", h, i), rows[i] * d * b), rd(("dO", h, i), rows[i] * d * b),
                                   wr(("D", h, i), rows[i] * bs)]) for h in range(heads) for i in range(tr)])

        def column_block(h, j):
            yield rd(("K", h, j), cols[j] * d * b)
            yield rd(("V", h, j), cols[j] * d * b)
            for i in range(first_row(j), tr):
                r = rows[i]
                yield from (rd(("Q", h, i), r * d * b), rd(("dO", h, i), r * d * b), rd(("dQ", h, i), r * d * b))
                if algo == "flash1":
                    yield rd(("O", h, i), r * d * b)
                yield from (rd((s, h, i), r * bs) for s in stats)
                yield wr(("dQ", h, i), r * d * b)
            yield wr(("dK", h, j), cols[j] * d * b)
            yield wr(("dV", h, j), cols[j] * d * b)

        def column_blocks(h):
            for j in range(tc):
                yield from column_block(h, j)

        if algo == "flash2":
            launches.append([column_block(h, j) for h in range(heads) for j in range(tc)])
        else:
            launches.append([column_blocks(h) for h in range(heads)])
    return launches


def flash_trace_accesses(problem: Problem, br: int, bc: int, heads: int) -> int:
    """Accesses the flash trace of `heads` heads makes, in closed form (what the replay's time is proportional
    to): per computed tile 2 (flash2: K, V), 7 (flash1 forward) or 6-7 (backward), plus a few per block."""
    n, causal = problem.n, problem.causal
    tr, tc = n_blocks(n, br), n_blocks(n, bc)
    tiles = visible_tiles(n, br, bc, causal)
    per_head = 2 * tiles + 3 * tr if problem.algo == "flash2" else 7 * tiles + 2 * tc
    if problem.backward:
        per_head += 3 * tr + 7 * tiles + 4 * tc
    return heads * per_head


#: the L2 replay refuses traces longer than this many accesses (about 2.5 µs each: ~25 s)
L2_MAX_ACCESSES = 10_000_000


def _standard_launches(problem: Problem, program, heads: int) -> list:
    """One launch per op of a naive/eager program; one program per head touching whole tensors."""
    n, d = problem.n, problem.d

    def size(name):
        return (n * n if program.shapes[name] == "nn" else n * d) * storage_bytes(program.dtypes[name])

    def key(name, h):
        return (name,) if name == "causal_mask" else (name, h)  # the mask is broadcast over heads

    launches = []
    for op in program.forward + program.backward:
        outs = [op.out] + ([op.extra_out] if op.extra_out else [])
        launches.append([[Access(key(x, h), size(x), False) for x in op.ins]
                         + [Access(key(x, h), size(x), True) for x in outs] for h in range(heads)])
    return launches


def dram_bytes(problem: Problem, res):
    """The L2 model's result (flashsim.model.l2.L2Result, all heads) for a count- or step-mode result `res`."""
    hw = problem.hardware
    if problem.algo in ("naive", "eager"):
        per_head = 1
        sim_heads = _l2_heads(per_head, hw.num_sms, problem.batch_heads)
        launches = _standard_launches(problem, res.program, sim_heads)
    else:
        tiles = n_blocks(problem.n, min(res.block_r, res.block_c))
        per_head = 1 if problem.algo == "flash1" else tiles
        sim_heads = _l2_heads(per_head, hw.num_sms, problem.batch_heads)
        accesses = flash_trace_accesses(problem, res.block_r, res.block_c, sim_heads)
        if accesses > L2_MAX_ACCESSES:
            raise FlashsimError(
                f"the L2 model would replay {accesses:.3g} tile accesses for {problem.algo} at N={problem.n} with "
                f"blocks {res.block_r}×{res.block_c} (about {accesses * 2.5e-6:.0f} s; the limit is "
                f"{L2_MAX_ACCESSES:.0e}): use larger blocks (block_r, block_c), a smaller n, or drop l2 "
                "(l2=False / no --l2): the requested bytes need no replay")
        launches = _flash_launches(problem, res.block_r, res.block_c, sim_heads)
    total = L2Result()
    for progs in launches:
        total = total + simulate_l2(progs, hw.l2_bytes, hw.num_sms)
    scale = problem.batch_heads / sim_heads
    return L2Result(*(int(round(x * scale)) for x in (total.requested_read_bytes, total.requested_write_bytes,
                                                        total.dram_read_bytes, total.dram_write_bytes)))
