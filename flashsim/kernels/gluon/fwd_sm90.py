"""FlashAttention forward for Hopper (sm_90) in Gluon, FA3-style: explicit warp roles instead of one program.

One CTA (persistent: at most one per SM) runs NC + 1 partitions that talk only through shared memory and mbarriers:

- a **producer** (one warp, 24 registers) that issues every TMA copy: for each output tile, the Q rows of each
  consumer (two buffers per consumer), then the K tiles into a ring of ``STAGES`` shared-memory slots and the V
  tiles into a ring of ``V_STAGES``, K one tile ahead of V (K is needed first, so a deeper K ring is where a spare
  slot helps: at d=128 three K slots and two V slots fit beside the four Q buffers, three of each do not). It never
  touches a register tile.
- ``NC`` **consumer warpgroups** (4 warps each; NC = 2 or 3), each owning ``BLOCK_M`` = 64 query rows of the CTA's
  ``NC * 64``-row tile. They share every K/V slot, so a slot is released when all NC of them have arrived.
  Each consumer runs the intra-warpgroup pipeline of FA3: it issues S_j = Q K_jᵀ and O += P_{j-1} V_{j-1} as two
  asynchronous wgmma groups, waits only for S_j, and computes softmax(S_j) while the tensor cores still run the PV
  product: the exponentials of one tile overlap the matmul of the other. Across tiles, it issues the next tile's
  S_0 with this tile's last PV product and writes this tile's O while that S_0 runs.
- **Ping-pong** (``PINGPONG``): the consumers take turns to issue their matmuls (a ring of ``turn`` mbarriers), so
  one warpgroup's softmax runs while the other's wgmma occupies the tensor cores.

The grid is persistent: every CTA walks the tile list with stride ``gridDim.x``, or (``BALANCED``) its own slice of
the list, which the host deals out longest-first to the CTA that would be free first
(:func:`flashsim.kernels.gluon.balanced_tile_lists`): under a causal mask the tiles' lengths differ, and a fixed
stride leaves some CTAs more work than others. The list is cut into sections of a few heads whose K and V fit in
the L2 together; within a section, query blocks go from the last (the longest under a causal mask) to the first, so
no long tile is left for the tail (:func:`_tile_coords`).

Layout and ragged N: Q, K and V are seen as 2-D ``(B*H*N, d)`` tensors. A tile that runs past N reads the next
head's rows (or TMA's zero fill past the end): those keys are masked to -inf, those queries are computed and never
stored (O and LSE use masked pointer stores). Outputs follow :func:`flashsim.kernels.flash_forward`: ``o`` (B, H, N,
d) in the input dtype, ``lse`` (B, H, N) fp32, the natural-log logsumexp of each score row.
"""
from __future__ import annotations

from typing import NamedTuple

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, warpgroup_mma,
                                                               warpgroup_mma_wait)

from flashsim.model.attention import online_softmax

from ._compat import tma_load as _tma_load

#: ln 2 as a compile-time constant of the kernel (the one definition: model.attention.online_softmax)
_LN2 = gl.constexpr(online_softmax.LN2)


class _Config(NamedTuple):
    """The compile-time configuration of :func:`attn_fwd_sm90` (its constexprs as
    :func:`flashsim.kernels.gluon.fwd_constexprs` gives them, less CONSUMER_REGS), passed to the partitions as one
    argument."""
    CAUSAL: bool
    NC: int
    BLOCK_M: int
    BLOCK_N: int
    HEAD_D: int
    STAGES: int
    PINGPONG: bool
    BALANCED: bool
    PV_WAIT_BLOCK: bool
    V_STAGES: int


class _Schedule(NamedTuple):
    """Which output tiles a CTA computes, and in what order: ``BH`` heads (batch x heads) of ``n_mblk`` query blocks,
    ``n_tiles`` tiles in all, walked in L2 sections of ``sec`` heads (:func:`_tile_coords`); with BALANCED, each
    CTA's slice ``order[start[pid]:start[pid+1]]`` of the host's tile lists (:func:`_my_tiles`). The kernel's
    arguments of those names: int32 scalars (a constexpr where Triton specialised one equal to 1) and pointers."""
    BH: gl.tensor
    n_mblk: gl.tensor
    n_tiles: gl.tensor
    sec: gl.tensor
    order_ptr: gl.tensor
    start_ptr: gl.tensor


@gluon.jit
def _tile_coords(t, sched):
    """Tile index -> (batch*head, query block), in L2-sized sections of ``sched.sec`` heads (the host picks ``sec``
    so that a section's K and V fit in about a third of the L2). Within a section, query blocks go from the last to
    the first (the longest first under a causal mask), heads inner: the CTAs running at the same time share the K/V
    of a few heads through the L2 instead of streaming every head's from DRAM, and the short tiles come last."""
    sec_tiles = sched.sec * sched.n_mblk
    first = (t // sec_tiles) * sched.sec             # first head of this tile's section
    r = t % sec_tiles
    heads = gl.minimum(sched.sec, sched.BH - first)  # the last section may hold fewer heads
    mblk = sched.n_mblk - 1 - r // heads
    bh = first + r % heads
    return bh, mblk


@gluon.jit
def _num_kv_tiles(mblk, N, CAUSAL: gl.constexpr, CTA_M: gl.constexpr, BLOCK_N: gl.constexpr):
    """K/V tiles one query block reads: all of them, or (causal) those up to the block's last row."""
    if CAUSAL:
        hi = gl.minimum((mblk + 1) * CTA_M, N)
    else:
        hi = N
    return gl.cdiv(hi, BLOCK_N)


@gluon.jit
def _my_tiles(sched, BALANCED: gl.constexpr):
    """(first list index, tile count) of this CTA: with BALANCED its slice order[start[pid]:start[pid+1]] of the
    host's balanced tile lists (:func:`flashsim.kernels.gluon.balanced_tile_lists`), else the stride pid, pid +
    nprog, ... (list index = position in that stride)."""
    pid = gl.program_id(0)
    if BALANCED:
        i0 = gl.load(sched.start_ptr + pid)
        n_mine = gl.load(sched.start_ptr + pid + 1) - i0
    else:
        i0 = 0
        n_mine = gl.cdiv(sched.n_tiles - pid, gl.num_programs(0))
    return i0, n_mine


@gluon.jit
def _tile_at(sched, i0, it, BALANCED: gl.constexpr):
    """The tile index of this CTA's it-th tile."""
    if BALANCED:
        t = gl.load(sched.order_ptr + i0 + it)
    else:
        t = gl.program_id(0) + it * gl.num_programs(0)
    return t


@gluon.jit
def _producer(C: gl.constexpr, cfg, N, sched, descs, bufs, bars, o_ptr, lse_ptr, qk_scale):
    """The load warp: TMA copies only, each completing on the ``ready`` mbarrier of its slot.

    Order per output tile: the Q rows of every consumer (double-buffered, so the next tile's Q lands while this
    one runs), K_0, then K_{j+1} before V_j: a consumer needs K_{j+1} (for S_{j+1}) before it needs V_j (for the
    PV product it issues in the same turn), so K runs one slot ahead of V. After its last tile the CTA loads one
    extra Q and K_0 (its first tile again): the consumers prefetch S_0 of a next tile unconditionally, and this
    tile's S_0 is computed and dropped. Arguments: those of :func:`_consumer`, with C = NC (unused)."""
    CAUSAL: gl.constexpr = cfg.CAUSAL
    NC: gl.constexpr = cfg.NC
    BLOCK_M: gl.constexpr = cfg.BLOCK_M
    BLOCK_N: gl.constexpr = cfg.BLOCK_N
    STAGES: gl.constexpr = cfg.STAGES
    V_STAGES: gl.constexpr = cfg.V_STAGES
    BALANCED: gl.constexpr = cfg.BALANCED
    q_desc, k_desc, v_desc = descs
    q_bufs, k_bufs, v_bufs = bufs
    q_ready, q_empty, k_ready, k_empty, v_ready, v_empty, turn = bars
    CTA_M: gl.constexpr = NC * BLOCK_M
    kc = 0                # K tiles issued: slot kc % STAGES
    vc = 0                # V tiles issued: slot vc % V_STAGES
    tile_count = 0        # output tiles started: Q buffer tile_count % 2
    i0, n_mine = _my_tiles(sched, BALANCED)
    for it in range(n_mine + 1):
        k_it = it
        if it == n_mine:
            k_it = 0                                    # the first tile again: the extra one whose S_0 is dropped
        t = _tile_at(sched, i0, k_it, BALANCED)
        bh, mblk = _tile_coords(t, sched)
        row0 = bh * N                                   # first row of this head in the (B*H*N, d) view
        qb = tile_count % 2
        for c in gl.static_range(NC):
            # wait until consumer c is done with this Q buffer (two tiles ago), then refill it
            mbarrier.wait(q_empty.index(2 * c + qb), ((tile_count // 2) & 1) ^ 1)
            mbarrier.expect(q_ready.index(2 * c + qb), q_desc.block_type.nbytes)
            # TMA: Q rows of consumer c, BLOCK_M*d elements, once per output tile
            _tma_load(q_desc, [row0 + mblk * CTA_M + c * BLOCK_M, 0],
                                            q_ready.index(2 * c + qb), q_bufs.index(2 * c + qb))
        s = kc % STAGES
        mbarrier.wait(k_empty.index(s), ((kc // STAGES) & 1) ^ 1)   # every consumer is done with this K slot
        mbarrier.expect(k_ready.index(s), k_desc.block_type.nbytes)
        # TMA: K tile, BLOCK_N*d elements, once per ring slot (shared by the NC consumers)
        _tma_load(k_desc, [row0, 0], k_ready.index(s), k_bufs.index(s))
        kc += 1
        if it < n_mine:
            n_kv = _num_kv_tiles(mblk, N, CAUSAL, CTA_M, BLOCK_N)
            for j in range(n_kv):
                if j + 1 < n_kv:
                    s = kc % STAGES
                    mbarrier.wait(k_empty.index(s), ((kc // STAGES) & 1) ^ 1)
                    mbarrier.expect(k_ready.index(s), k_desc.block_type.nbytes)
                    # TMA: K tile, BLOCK_N*d elements, once per ring slot (shared by the NC consumers)
                    _tma_load(k_desc, [row0 + (j + 1) * BLOCK_N, 0], k_ready.index(s),
                                                    k_bufs.index(s))
                    kc += 1
                s = vc % V_STAGES
                mbarrier.wait(v_empty.index(s), ((vc // V_STAGES) & 1) ^ 1)   # every consumer is done with V
                mbarrier.expect(v_ready.index(s), v_desc.block_type.nbytes)
                # TMA: V tile, BLOCK_N*d elements, once per ring slot (shared by the NC consumers)
                _tma_load(v_desc, [row0 + j * BLOCK_N, 0], v_ready.index(s), v_bufs.index(s))
                vc += 1
        tile_count += 1


@gluon.jit
def _needs_mask(q0, j, N, CAUSAL: gl.constexpr, BLOCK_N: gl.constexpr):
    """Whether K/V tile j needs the mask for query rows from q0: it holds keys past N, or (causal) keys after the
    first query row. Every other tile skips the masking arithmetic (FA2's trick)."""
    end = (j + 1) * BLOCK_N
    need = end > N
    if CAUSAL:
        need = need | (end > q0 + 1)
    return need


@gluon.jit
def _masked_scores(s, q0, j, N, s_layout: gl.constexpr, CAUSAL: gl.constexpr, BLOCK_M: gl.constexpr,
                   BLOCK_N: gl.constexpr):
    """Scores of keys past N, and (causal) of keys after the query, set to -inf."""
    rows = q0 + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_layout))
    cols = j * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
    keep = gl.expand_dims(cols < N, 0)
    if CAUSAL:
        keep = keep & (gl.expand_dims(rows, 1) >= gl.expand_dims(cols, 0))
    return gl.where(keep, s, float("-inf"))


@gluon.jit
def _softmax_first(sc, q0, N, qk_scale, s_layout: gl.constexpr, CAUSAL: gl.constexpr, BLOCK_M: gl.constexpr,
                   BLOCK_N: gl.constexpr):
    """softmax(S_0) of a tile, the first K/V tile: (row max in log2 units, row sum of exp, P in fp32)."""
    if _needs_mask(q0, 0, N, CAUSAL, BLOCK_N):
        sc = _masked_scores(sc, q0, 0, N, s_layout, CAUSAL, BLOCK_M, BLOCK_N)
    m_i = gl.max(sc, 1) * qk_scale                   # running row max (log2 units)
    p = gl.exp2(sc * qk_scale - gl.expand_dims(m_i, 1))
    return m_i, gl.sum(p, 1), p


@gluon.jit
def _store_tile(acc, m_i, l_i, bh, q0, o_ptr, lse_ptr, N, o_layout: gl.constexpr, s_layout: gl.constexpr,
                BLOCK_M: gl.constexpr, HEAD_D: gl.constexpr):
    """Epilogue of one warpgroup's rows of a tile: O = acc / l and LSE = ln(sum exp), rows past N dropped."""
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
    acc = acc * gl.expand_dims(gl.convert_layout(1.0 / l_i, row_o), 1)
    rows_o = q0 + gl.arange(0, BLOCK_M, layout=row_o)
    cols_o = gl.arange(0, HEAD_D, layout=gl.SliceLayout(0, o_layout))
    row_off = (bh * N + rows_o).to(gl.int64) * HEAD_D
    o_ptrs = o_ptr + gl.expand_dims(row_off, 1) + gl.expand_dims(cols_o, 0)
    o_mask = gl.expand_dims(rows_o < N, 1) & gl.expand_dims(cols_o < HEAD_D, 0)
    # writes O once: BLOCK_M*d elements per warpgroup per tile (rows past N dropped)
    gl.store(o_ptrs, acc.to(o_ptr.dtype.element_ty), mask=o_mask)
    rows_s = q0 + gl.arange(0, BLOCK_M, layout=row_s)
    lse = (m_i + gl.log2(l_i)) * _LN2
    # writes LSE once: BLOCK_M fp32 per warpgroup per tile
    gl.store(lse_ptr + bh * N + rows_s, lse, mask=rows_s < N)


@gluon.jit
def _consumer(C: gl.constexpr, cfg, N, sched, descs, bufs, bars, o_ptr, lse_ptr, qk_scale):
    """Consumer warpgroup C: BLOCK_M query rows of each tile, S and O in registers, P handed to wgmma in registers.

    Pipeline (FA3's intra-warpgroup overlap): in each turn it issues S_j = Q K_jᵀ and O += P_{j-1} V_{j-1} as two
    asynchronous wgmma groups, waits for S_j only, and runs softmax(S_j) while the PV group is still on the tensor
    cores. Across tiles, the last PV product of a tile is issued together with S_0 of the next, and the epilogue
    (O / l, stores) runs while that S_0 computes; softmax(S_0) then runs at the top of the next tile with no
    product of this warpgroup in flight. (Issuing S_0 first and running its softmax under the last PV product
    instead, as inside a tile, was measured no faster: benchmarks/results/NOTES.md.)

    Arguments (those of every partition, :func:`attn_fwd_sm90`):

    - ``C``: the partition's index; ``cfg``: the compile-time configuration (:class:`_Config`); ``N``: keys and
      queries per head; ``sched``: the tile schedule (:class:`_Schedule`);
    - ``descs``: the TMA descriptors of Q, K and V; ``bufs``: their shared-memory tiles (Q: two buffers per consumer,
      K: ``STAGES`` ring slots, V: ``V_STAGES``); ``bars``: an mbarrier per buffer (``q_ready``, ``q_empty``,
      ``k_ready``, ``k_empty``, ``v_ready``, ``v_empty``) and ``turn``, the ring of ping-pong turns;
    - ``o_ptr``, ``lse_ptr``: the outputs; ``qk_scale``: the softmax scale times log2(e)."""
    CAUSAL: gl.constexpr = cfg.CAUSAL
    NC: gl.constexpr = cfg.NC
    BLOCK_M: gl.constexpr = cfg.BLOCK_M
    BLOCK_N: gl.constexpr = cfg.BLOCK_N
    HEAD_D: gl.constexpr = cfg.HEAD_D
    STAGES: gl.constexpr = cfg.STAGES
    V_STAGES: gl.constexpr = cfg.V_STAGES
    PINGPONG: gl.constexpr = cfg.PINGPONG
    BALANCED: gl.constexpr = cfg.BALANCED
    PV_WAIT_BLOCK: gl.constexpr = cfg.PV_WAIT_BLOCK
    q_desc, k_desc, v_desc = descs
    q_bufs, k_bufs, v_bufs = bufs
    q_ready, q_empty, k_ready, k_empty, v_ready, v_empty, turn = bars
    CTA_M: gl.constexpr = NC * BLOCK_M
    dtype: gl.constexpr = q_desc.dtype
    # wgmma accumulator layouts: 4 warps along M (m64 per instruction), the whole tile width along N
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_D, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)

    i0, n_mine = _my_tiles(sched, BALANCED)
    FIRST: gl.constexpr = 1 if C == 0 else 0         # consumer 0 starts: its first turn wait passes at once
    kc = 0                                           # K/V tiles consumed (ring slot kc % STAGES)
    tile_count = 0                                   # Q buffer tile_count % 2
    turn_count = 0                                   # ping-pong turns taken: parity of the turn barrier

    # ---- prologue: S_0 of the first tile (the grid never exceeds the tile count) ----
    mbarrier.wait(q_ready.index(2 * C), 0)
    s_idx = kc % STAGES
    mbarrier.wait(k_ready.index(s_idx), (kc // STAGES) & 1)
    if PINGPONG:
        mbarrier.wait(turn.index(C), (turn_count + FIRST) & 1)
    sc = warpgroup_mma(q_bufs.index(2 * C), k_bufs.index(s_idx).permute((1, 0)),
                       gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout), use_acc=False, is_async=True)
    if PINGPONG:
        mbarrier.arrive(turn.index((C + 1) % NC))
        turn_count += 1

    for it in range(n_mine):
        t = _tile_at(sched, i0, it, BALANCED)
        bh, mblk = _tile_coords(t, sched)
        q0 = mblk * CTA_M + C * BLOCK_M              # first query row (within the head) of this warpgroup
        n_kv = _num_kv_tiles(mblk, N, CAUSAL, CTA_M, BLOCK_N)
        q_smem = q_bufs.index(2 * C + tile_count % 2)
        acc = gl.zeros([BLOCK_M, HEAD_D], gl.float32, o_layout)   # running unnormalised O

        # ---- tile 0: S_0 was issued in the previous turn ----
        sc = warpgroup_mma_wait(0, deps=(sc,))
        mbarrier.arrive(k_empty.index(s_idx))        # this warpgroup is done reading K_0
        m_i, l_i, p = _softmax_first(sc, q0, N, qk_scale, s_layout, CAUSAL, BLOCK_M, BLOCK_N)
        p16 = gl.convert_layout(p.to(dtype), p_layout)
        prev = kc                                    # K/V tile count of V_{j-1}: V slot prev % V_STAGES
        kc += 1

        # ---- tiles 1..n_kv-1: issue S_j and O += P_{j-1} V_{j-1}; softmax(S_j) while PV runs ----
        for j in range(1, n_kv):
            s_idx = kc % STAGES
            mbarrier.wait(k_ready.index(s_idx), (kc // STAGES) & 1)
            if PINGPONG:
                mbarrier.wait(turn.index(C), (turn_count + FIRST) & 1)
            sc = warpgroup_mma(q_smem, k_bufs.index(s_idx).permute((1, 0)),
                               gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout), use_acc=False, is_async=True)
            mbarrier.wait(v_ready.index(prev % V_STAGES), (prev // V_STAGES) & 1)
            acc = warpgroup_mma(p16, v_bufs.index(prev % V_STAGES), acc, is_async=True)
            if PINGPONG:
                mbarrier.arrive(turn.index((C + 1) % NC))
                turn_count += 1
            sc = warpgroup_mma_wait(1, deps=(sc,))   # S_j done; the PV group may still run
            mbarrier.arrive(k_empty.index(s_idx))
            if _needs_mask(q0, j, N, CAUSAL, BLOCK_N):
                sc = _masked_scores(sc, q0, j, N, s_layout, CAUSAL, BLOCK_M, BLOCK_N)
            m_new = gl.maximum(m_i, gl.max(sc, 1) * qk_scale)
            p = gl.exp2(sc * qk_scale - gl.expand_dims(m_new, 1))
            alpha = gl.exp2(m_i - m_new)             # rescales what was summed so far
            l_i = l_i * alpha + gl.sum(p, 1)
            m_i = m_new
            if PV_WAIT_BLOCK:
                # wait for the next K slot here, before the wait for the PV group: the mbarrier's wait loop ends a
                # basic block, and ptxas would otherwise schedule the PV wait at the top of the block that holds
                # the softmax, ahead of every exponential, so none of them would overlap the PV product (the next
                # iteration waits on the same phase again, which passes at once)
                mbarrier.wait(k_ready.index((kc + 1) % STAGES), ((kc + 1) // STAGES) & 1)
            # P_{j-1} stays in deps so that its registers live until the PV group that reads them is done
            acc, p16 = warpgroup_mma_wait(0, deps=(acc, p16))
            mbarrier.arrive(v_empty.index(prev % V_STAGES))   # this warpgroup is done reading V_{j-1}
            acc = acc * gl.expand_dims(gl.convert_layout(alpha, row_o), 1)
            p16 = gl.convert_layout(p.to(dtype), p_layout)
            prev = kc
            kc += 1

        mbarrier.arrive(q_empty.index(2 * C + tile_count % 2))   # last QKᵀ of this tile done: Q may be refilled
        nq = 2 * C + (tile_count + 1) % 2
        # ---- one turn: the last PV product of this tile, then S_0 of the next tile ----
        mbarrier.wait(v_ready.index(prev % V_STAGES), (prev // V_STAGES) & 1)
        if PINGPONG:
            mbarrier.wait(turn.index(C), (turn_count + FIRST) & 1)
        acc = warpgroup_mma(p16, v_bufs.index(prev % V_STAGES), acc, is_async=True)
        mbarrier.wait(q_ready.index(nq), ((tile_count + 1) // 2) & 1)
        s_idx = kc % STAGES
        mbarrier.wait(k_ready.index(s_idx), (kc // STAGES) & 1)
        sc = warpgroup_mma(q_bufs.index(nq), k_bufs.index(s_idx).permute((1, 0)),
                           gl.zeros([BLOCK_M, BLOCK_N], gl.float32, s_layout), use_acc=False, is_async=True)
        if PINGPONG:
            mbarrier.arrive(turn.index((C + 1) % NC))
            turn_count += 1
        acc, p16 = warpgroup_mma_wait(1, deps=(acc, p16))   # the PV group is done; the next S_0 may run
        mbarrier.arrive(v_empty.index(prev % V_STAGES))
        # ---- epilogue, while the next S_0 runs ----
        _store_tile(acc, m_i, l_i, bh, q0, o_ptr, lse_ptr, N, o_layout, s_layout, BLOCK_M, HEAD_D)
        tile_count += 1

    # ---- the extra S_0 issued after the last tile: wait for it and release its K slot and Q buffer ----
    sc = warpgroup_mma_wait(0, deps=(sc,))
    mbarrier.arrive(k_empty.index(s_idx))
    mbarrier.arrive(q_empty.index(2 * C + tile_count % 2))


@gluon.jit
def attn_fwd_sm90(q_desc, k_desc, v_desc, o_ptr, lse_ptr, qk_scale, N, BH, n_mblk, n_tiles, sec, order_ptr, start_ptr,
                  CAUSAL: gl.constexpr, NC: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                  HEAD_D: gl.constexpr, STAGES: gl.constexpr, PINGPONG: gl.constexpr, CONSUMER_REGS: gl.constexpr,
                  BALANCED: gl.constexpr = False, PV_WAIT_BLOCK: gl.constexpr = False, V_STAGES: gl.constexpr = 2):
    """Allocate the shared-memory ring and the mbarriers, then fork into producer and consumer partitions."""
    gl.static_assert(NC == 2 or NC == 3, "two or three consumer warpgroups")
    dtype: gl.constexpr = q_desc.dtype
    q_bufs = gl.allocate_shared_memory(dtype, [2 * NC, BLOCK_M, HEAD_D], q_desc.layout)   # 2 per consumer
    k_bufs = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_D], k_desc.layout)
    v_bufs = gl.allocate_shared_memory(dtype, [V_STAGES, BLOCK_N, HEAD_D], v_desc.layout)
    q_ready = gl.allocate_shared_memory(gl.int64, [2 * NC, 1], mbarrier.MBarrierLayout())
    q_empty = gl.allocate_shared_memory(gl.int64, [2 * NC, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [NC, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [V_STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [V_STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(2 * NC):
        mbarrier.init(q_ready.index(i), count=1)     # completed by the TMA byte count
        mbarrier.init(q_empty.index(i), count=1)     # consumer i // 2
    for i in gl.static_range(NC):
        mbarrier.init(turn.index(i), count=1)        # the consumer before i in the ping-pong ring
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=NC)    # every consumer releases the slot
    for i in gl.static_range(V_STAGES):
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(v_empty.index(i), count=NC)
    fence_async_shared()

    # Partition c, for c = 0 .. NC, runs consumer warpgroup c for c < NC (consumer 0 in the kernel's own four warps,
    # each other one in four more) and the producer warp for c == NC, each with the same arguments (the producer
    # ignores c; _consumer describes them). The tuple is written in the call rather than assigned to a variable
    # first: an assignment would turn its constexprs (the configuration, and any int argument equal to 1, which
    # Triton passes as a constexpr) into run-time values, and so change the generated code.
    gl.warp_specialize(
        [(_consumer if c < NC else _producer,
          (c, _Config(CAUSAL, NC, BLOCK_M, BLOCK_N, HEAD_D, STAGES, PINGPONG, BALANCED, PV_WAIT_BLOCK, V_STAGES), N,
           _Schedule(BH, n_mblk, n_tiles, sec, order_ptr, start_ptr), (q_desc, k_desc, v_desc),
           (q_bufs, k_bufs, v_bufs), (q_ready, q_empty, k_ready, k_empty, v_ready, v_empty, turn), o_ptr, lse_ptr,
           qk_scale))
         for c in (0, 1, 2, 3)[:NC + 1]],
        [4] * (NC - 1) + [1], [CONSUMER_REGS] * (NC - 1) + [24])
