"""FlashAttention backward for Hopper (sm_90) in Gluon, FA3-style: K and V resident, Q and dO streamed by TMA.

One CTA per (K/V row block of ``BLOCK_N`` = 128 keys, batch*head) runs two partitions that talk only through
shared memory and mbarriers:

- a **producer** (one warp, 24 registers) that issues every TMA copy: the CTA's K and V tiles once, then, for each
  query block the keys see (causal: from the diagonal down), the Q and dO tiles into a ring of ``STAGES`` slots.
- the **compute** partition: two warpgroups (8 warps), 64 keys each, on asynchronous wgmma. Per query block of
  ``BLOCK_M`` rows it issues Sᵀ = K Qᵀ and dPᵀ = V dOᵀ together, recomputes Pᵀ = exp(Sᵀ·scale − L) while dPᵀ is still
  on the tensor cores, issues dV += Pᵀ dO and computes dSᵀ = Pᵀ ∘ (dPᵀ − delta) while dV runs, then dK += dSᵀ Q and
  dQ_partial = dS K, the last from dS written to shared memory (both warpgroups need all 128 keys of it). With
  ``PIPE``, Sᵀ and dPᵀ of the next query block are issued before this block's dQ_partial is waited for, so the tensor
  cores have work while it goes out. dK and dV stay in registers for the whole CTA and are written once; each dQ_partial is
  added into an fp32 dQ buffer (FlashAttention-2's and -3's choice: five matmuls per tile pair instead of the
  seven of recomputing dQ in its own pass): by a TMA reduce-add from shared memory (``DQ_TMA``, FA3's way: whole
  128-byte lines, issued by one thread, asynchronous), or by per-element atomics from registers.

Options (constexpr; :data:`flashsim.kernels.gluon.BWD_CONFIGS`): ``LSE_SMEM``: L and delta of each query block come
through the ring slot with Q and dO (TMA, by the producer) and are read from shared memory when used, so they do not
hold registers across the wgmma issue (the pointer-load kernel spills at d=128). Their descriptors are 1-D over rows
of ``N_LSE`` fp32 per head, N rounded up to 4 (16 bytes) on the host, because the global address a TMA copy starts
at must be 16-byte aligned: with rows of N fp32 the copy of head bh starts at byte 4·bh·N, which for N not a multiple
of 4 is not, and the copy raises an illegal instruction. ``PIPE``: cross-block overlap (ptxas serialises it, C7514).
Three options order the elementwise work of a block so that ptxas can interleave the exponentials with other
arithmetic (one ``MUFU.EX2`` issues every 8 cycles per warp, and with nothing else to issue the warp waits):
``DV_LATE`` issues dV after dS is computed, beside dK, as FA4 does, so that no wgmma issue sits between Pᵀ and dSᵀ;
``MASK_SPLIT`` (without ``PIPE``) runs the blocks that need the causal or ragged-N mask in loops of their own, so
that the main loop's trip has no branch; ``MASK_FIRST`` applies the mask to the exponent (-inf) before the
exponentials, so that a branch around it at least precedes them. ``LSE_LOG2``: L arrives scaled by log2(e) (the
prologue's copy, :func:`flashsim.kernels.gluon.bwd_host.bwd_prologue`), as in FA4, a multiply less per score row.

Layout and ragged N: Q, K, V, dO are seen as 2-D ``(B*H*N, d)`` tensors. A tile that runs past N reads the next
head's rows (or TMA's zero fill past the end): Pᵀ is set to 0 for keys or queries past N (so their dS is 0 too),
and rows past N are never stored or added. Inputs and outputs follow :func:`flashsim.kernels.flash_backward`:
lse (B, H, N) fp32 natural-log logsumexp from the forward pass, delta = rowsum(dO ∘ O) (B, H, N) fp32.
"""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma, warpgroup_mma

from flashsim.model.attention import online_softmax

from ._compat import mma_wait as _mma_wait
from ._compat import sync as _sync
from ._compat import tma_add as _tma_add
from ._compat import tma_load as _tma_load

#: log2(e) as a compile-time constant of the kernel (the one definition: model.attention.online_softmax)
_LOG2E = gl.constexpr(online_softmax.LOG2E)


@gluon.jit
def _m_range(nblk, N, CAUSAL: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr):
    """Query blocks [lo, hi) that K/V block ``nblk`` sees: all, or (causal) those from the diagonal down."""
    if CAUSAL:
        lo = (nblk * BLOCK_N) // BLOCK_M
    else:
        lo = 0
    return lo, gl.cdiv(N, BLOCK_M)


@gluon.jit
def _cta_coords(pid, n_kblk):
    """CTA -> (K/V block, batch*head), key blocks inner: the CTAs that run together share one head's Q/dO tiles
    through the L2."""
    return pid % n_kblk, pid // n_kblk


@gluon.jit
def _m_block(c, lo, hi, REVERSE: gl.constexpr):
    """The c-th query block a CTA visits: lo, lo+1, ... or (REVERSE) hi-1, hi-2, ... down to the diagonal. Under a
    causal mask every CTA of a head then starts at the last query block and walks back in step with the others, so
    the CTAs running together read the same Q and dO tiles (L2 hits) however long each one is."""
    if REVERSE:
        return hi - 1 - c
    else:
        return lo + c


@gluon.jit
def _bwd_producer(q_desc, do_desc, k_desc, v_desc, q_bufs, do_bufs, k_smem, v_smem, kv_ready, ready, empty,
                  lse_desc, delta_desc, lse_src, delta_src, N, N_LSE, n_kblk, CAUSAL: gl.constexpr,
                  BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr, REVERSE: gl.constexpr,
                  LSE_SMEM: gl.constexpr):
    """The load warp: K and V once, then Q and dO (LSE_SMEM: and L, delta into ``lse_src``/``delta_src``, the
    ring's fp32 slots; otherwise those are the compute warps' pointers and unused here) of each query block into
    the ring (slot c % STAGES)."""
    nblk, bh = _cta_coords(gl.program_id(0), n_kblk)
    row0 = bh * N
    mbarrier.expect(kv_ready, k_desc.block_type.nbytes + v_desc.block_type.nbytes)
    # TMA: K tile, BLOCK_N*d elements, once per CTA (N*d per head over all CTAs)
    _tma_load(k_desc, [row0 + nblk * BLOCK_N, 0], kv_ready, k_smem)
    # TMA: V tile, BLOCK_N*d elements, once per CTA
    _tma_load(v_desc, [row0 + nblk * BLOCK_N, 0], kv_ready, v_smem)
    lo, hi = _m_range(nblk, N, CAUSAL, BLOCK_M, BLOCK_N)
    for c in range(0, hi - lo):
        i = _m_block(c, lo, hi, REVERSE)
        s = c % STAGES
        mbarrier.wait(empty.index(s), ((c // STAGES) & 1) ^ 1)   # the compute partition is done with this slot
        if LSE_SMEM:
            mbarrier.expect(ready.index(s), q_desc.block_type.nbytes + do_desc.block_type.nbytes
                            + lse_desc.block_type.nbytes + delta_desc.block_type.nbytes)
            # TMA: L and delta of the block, BLOCK_M fp32 each, once per (query block, K/V block) pair
            # (rows of N_LSE, a multiple of 4: every copy starts 16-byte aligned)
            _tma_load(lse_desc, [bh * N_LSE + i * BLOCK_M], ready.index(s), lse_src.index(s))
            _tma_load(delta_desc, [bh * N_LSE + i * BLOCK_M], ready.index(s),
                                            delta_src.index(s))
        else:
            mbarrier.expect(ready.index(s), q_desc.block_type.nbytes + do_desc.block_type.nbytes)
        # TMA: Q tile, BLOCK_M*d elements, once per (query block, K/V block) pair (causal: from the diagonal down)
        _tma_load(q_desc, [row0 + i * BLOCK_M, 0], ready.index(s), q_bufs.index(s))
        # TMA: dO tile, BLOCK_M*d elements, once per (query block, K/V block) pair, like Q
        _tma_load(do_desc, [row0 + i * BLOCK_M, 0], ready.index(s), do_bufs.index(s))


@gluon.jit
def _needs_mask(m0, n0, N, CAUSAL: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                MASK_SPLIT: gl.constexpr, MASKED: gl.constexpr):
    """Whether the (query block at m0, key block at n0) tile needs the mask: a ragged edge or (causal) the diagonal;
    under MASK_SPLIT the caller's loop knows it (MASKED), so the trip has no branch."""
    if MASK_SPLIT:
        return MASKED
    need = (m0 + BLOCK_M > N) | (n0 + BLOCK_N > N)
    if CAUSAL:
        need = need | (m0 < n0 + BLOCK_N)
    return need


@gluon.jit
def _keep(qs, q_ok, n0, N, CAUSAL: gl.constexpr, BLOCK_N: gl.constexpr, s_layout: gl.constexpr):
    """Which entries of a (BLOCK_N keys, BLOCK_M queries) tile of Sᵀ count: query and key inside N and, causal, the
    key not after the query."""
    keys = n0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, s_layout))
    keep = gl.expand_dims(q_ok, 0) & gl.expand_dims(keys < N, 1)
    if CAUSAL:
        keep = keep & (gl.expand_dims(qs, 0) >= gl.expand_dims(keys, 1))
    return keep


@gluon.jit
def _issue_s_dp(k_smem, v_smem, q_s, do_s, s_layout: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr):
    """Issue Sᵀ = K Qᵀ and dPᵀ = V dOᵀ as two asynchronous wgmma groups (BLOCK_N x BLOCK_M each, fp32)."""
    sT = warpgroup_mma(k_smem, q_s.permute((1, 0)), gl.zeros([BLOCK_N, BLOCK_M], gl.float32, s_layout),
                       use_acc=False, is_async=True)
    dpT = warpgroup_mma(v_smem, do_s.permute((1, 0)), gl.zeros([BLOCK_N, BLOCK_M], gl.float32, s_layout),
                        use_acc=False, is_async=True)
    return sT, dpT


@gluon.jit
def _bwd_step(c, i, sT, dpT, dk, dv, q_bufs, do_bufs, k_smem, v_smem, ds_smem, dq_smem, ready, empty,
              dq_desc, dq_ptr, lse_src, delta_src, qk_scale, bh, n0, N,
              CAUSAL: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_D: gl.constexpr,
              STAGES: gl.constexpr, DQ_WN: gl.constexpr, DS_TRANS: gl.constexpr, DQ_TMA: gl.constexpr,
              ISSUED: gl.constexpr, NEXT: gl.constexpr, LSE_SMEM: gl.constexpr = False,
              WG_LOCAL: gl.constexpr = False, DQ_WAIT_LATE: gl.constexpr = False, MASK_SPLIT: gl.constexpr = False,
              MASKED: gl.constexpr = False, MASK_FIRST: gl.constexpr = False, DV_LATE: gl.constexpr = False,
              LSE_LOG2: gl.constexpr = False):
    """One query block i against the CTA's keys. ISSUED: its Sᵀ and dPᵀ were issued by the step before (else it
    issues them here); NEXT: issue those of block i+1 before waiting for this block's dQ (so the tensor cores stay
    busy while dQ goes out) and return their tokens. ``lse_src``, ``delta_src``: L and delta as pointers to rows of
    N fp32, or (LSE_SMEM) as the ring's shared-memory slots the producer filled. MASK_SPLIT: the caller knows
    whether this block needs the mask (MASKED) and the trip has no branch around it. MASK_FIRST: the mask sets the
    exponent to -inf before the exponentials (else it zeroes Pᵀ after them). DV_LATE: dV is issued after dS is
    computed, beside dK (FA4's order), so that the exponentials and dS share one stretch of code with no wgmma issue
    between them. LSE_LOG2: L comes scaled by log2(e) already (the prologue's copy)."""
    dtype: gl.constexpr = q_bufs.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[8, 1],
                                                       instr_shape=[16, BLOCK_M, 16])
    kv_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[8, 1],
                                                        instr_shape=[16, HEAD_D, 16])
    # dQ (BLOCK_M rows): with BLOCK_M = 64, one warpgroup's M, the two warpgroups split the head dim
    dq_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[8 // DQ_WN, DQ_WN],
                                                        instr_shape=[16, HEAD_D // DQ_WN, 16])
    op_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=kv_layout, k_width=2)
    s = c % STAGES
    m0 = i * BLOCK_M
    q_s = q_bufs.index(s)
    do_s = do_bufs.index(s)
    qs = m0 + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, s_layout))   # query index of each Sᵀ column
    q_ok = qs < N
    if not LSE_SMEM:
        # reads L and delta once per (query block, K/V block) pair: BLOCK_M fp32 each
        lse2 = gl.load(lse_src + bh * N + qs, mask=q_ok, other=0.0)
        if not LSE_LOG2:
            lse2 = lse2 * _LOG2E
        delta = gl.load(delta_src + bh * N + qs, mask=q_ok, other=0.0)
    if not ISSUED:
        mbarrier.wait(ready.index(s), (c // STAGES) & 1)
        sT, dpT = _issue_s_dp(k_smem, v_smem, q_s, do_s, s_layout, BLOCK_M, BLOCK_N)

    sT = _mma_wait(1, deps=(sT,), own=WG_LOCAL)      # Sᵀ done; dPᵀ may still run
    if LSE_SMEM:
        # L of the block from its ring slot (the producer's TMA copy, rows past N: the next head's or zeros, masked
        # below): read now, not held in registers across the wgmma issue
        lse2 = lse_src.index(s).load(gl.SliceLayout(0, s_layout))
        if not LSE_LOG2:
            lse2 = lse2 * _LOG2E                     # (LSE_LOG2: the prologue scaled it, once per row)
    if MASK_FIRST:
        need = _needs_mask(m0, n0, N, CAUSAL, BLOCK_M, BLOCK_N, MASK_SPLIT, MASKED)
        xT = sT * qk_scale - gl.expand_dims(lse2, 0)     # log2 of Pᵀ
        if need:
            xT = gl.where(_keep(qs, q_ok, n0, N, CAUSAL, BLOCK_N, s_layout), xT, float("-inf"))
        pT = gl.exp2(xT)                             # recomputed Pᵀ
    else:
        pT = gl.exp2(sT * qk_scale - gl.expand_dims(lse2, 0))   # recomputed Pᵀ
        if _needs_mask(m0, n0, N, CAUSAL, BLOCK_M, BLOCK_N, MASK_SPLIT, MASKED):
            pT = gl.where(_keep(qs, q_ok, n0, N, CAUSAL, BLOCK_N, s_layout), pT, 0.0)
    pT16 = gl.convert_layout(pT.to(dtype), op_layout)
    if DV_LATE:
        dpT = _mma_wait(0, deps=(dpT,), own=WG_LOCAL)    # dPᵀ done; nothing else in flight
    else:
        dv = warpgroup_mma(pT16, do_s, dv, is_async=True)
        dpT = _mma_wait(1, deps=(dpT,), own=WG_LOCAL)    # dPᵀ done; dV may still run
    if LSE_SMEM:
        delta = delta_src.index(s).load(gl.SliceLayout(0, s_layout))
    dsT = (pT * (dpT - gl.expand_dims(delta, 0))).to(dtype)
    dsT_op = gl.convert_layout(dsT, op_layout)
    if DV_LATE:
        dv = warpgroup_mma(pT16, do_s, dv, is_async=True)
    dk = warpgroup_mma(dsT_op, q_s, dk, is_async=True)
    if DQ_TMA and not DQ_WAIT_LATE:
        tma.store_wait(0)                            # the previous block's dQ add has read dq_smem
    if DS_TRANS:
        ds_smem.store(dsT)                           # (BLOCK_N, BLOCK_M); dQ reads it transposed
    else:
        ds_smem.store(gl.permute(dsT, (1, 0)))       # (BLOCK_M, BLOCK_N)
    fence_async_shared()
    if DQ_TMA and DQ_WAIT_LATE:
        tma.store_wait(0)                            # the same wait, ordered for the others by the barrier below
    _sync()                                          # every warp's part of dS is in shared memory
    if DS_TRANS:
        dq = warpgroup_mma(ds_smem.permute((1, 0)), k_smem, gl.zeros([BLOCK_M, HEAD_D], gl.float32, dq_layout),
                           use_acc=False, is_async=True)
    else:
        dq = warpgroup_mma(ds_smem, k_smem, gl.zeros([BLOCK_M, HEAD_D], gl.float32, dq_layout),
                           use_acc=False, is_async=True)
    if NEXT:
        c1 = c + 1
        s1 = c1 % STAGES
        mbarrier.wait(ready.index(s1), (c1 // STAGES) & 1)
        sT, dpT = _issue_s_dp(k_smem, v_smem, q_bufs.index(s1), do_bufs.index(s1), s_layout, BLOCK_M, BLOCK_N)
        dv, dk, dq, pT16, dsT_op = _mma_wait(2, deps=(dv, dk, dq, pT16, dsT_op), own=WG_LOCAL)
    else:
        dv, dk, dq, pT16, dsT_op = _mma_wait(0, deps=(dv, dk, dq, pT16, dsT_op), own=WG_LOCAL)
    if DQ_TMA:
        dq_smem.store(dq)
        fence_async_shared()
        _sync()                                      # dQ is in shared memory; the slot and dS are read
        mbarrier.arrive(empty.index(s))
        # TMA reduce: adds BLOCK_M*d fp32 into dQ per (query block, K/V block) pair (rows past N add zeros)
        _tma_add(dq_desc, [bh * N + m0, 0], dq_smem)
    else:
        _sync()                                      # every warpgroup is done reading the slot and dS
        mbarrier.arrive(empty.index(s))
        rows_dq = m0 + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, dq_layout))
        cols_dq = gl.arange(0, HEAD_D, layout=gl.SliceLayout(0, dq_layout))
        dq_off = gl.expand_dims((bh * N + rows_dq).to(gl.int64) * HEAD_D, 1) + gl.expand_dims(cols_dq, 0)
        dq_mask = gl.expand_dims(rows_dq < N, 1) & gl.expand_dims(cols_dq < HEAD_D, 0)
        # adds into dQ (fp32): BLOCK_M*d atomics per (query block, K/V block) pair (rows past N dropped)
        gl.atomic_add(dq_ptr + dq_off, dq, mask=dq_mask, sem="relaxed")
    if NEXT:
        return dk, dv, sT, dpT
    else:
        return dk, dv


@gluon.jit
def _bwd_compute(q_bufs, do_bufs, k_smem, v_smem, ds_smem, dq_smem, kv_ready, ready, empty,
                 dq_desc, dq_ptr, dk_ptr, dv_ptr, lse_src, delta_src, qk_scale, sm_scale, N, n_kblk,
                 CAUSAL: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_D: gl.constexpr,
                 STAGES: gl.constexpr, DQ_WN: gl.constexpr, DS_TRANS: gl.constexpr, DQ_TMA: gl.constexpr,
                 PIPE: gl.constexpr, REVERSE: gl.constexpr, LSE_SMEM: gl.constexpr, WG_LOCAL: gl.constexpr,
                 DQ_WAIT_LATE: gl.constexpr, MASK_SPLIT: gl.constexpr, MASK_FIRST: gl.constexpr,
                 DV_LATE: gl.constexpr, LSE_LOG2: gl.constexpr):
    """Two warpgroups, 64 keys each (wgmma layouts with 8 warps along the 128 keys): dK, dV in registers for the
    whole CTA; PIPE: Sᵀ and dPᵀ of block i+1 issued before block i's dQ is waited for and added."""
    dtype: gl.constexpr = q_bufs.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[8, 1],
                                                       instr_shape=[16, BLOCK_M, 16])
    kv_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[8, 1],
                                                        instr_shape=[16, HEAD_D, 16])
    nblk, bh = _cta_coords(gl.program_id(0), n_kblk)
    n0 = nblk * BLOCK_N
    lo, hi = _m_range(nblk, N, CAUSAL, BLOCK_M, BLOCK_N)
    dk = gl.zeros([BLOCK_N, HEAD_D], gl.float32, kv_layout)
    dv = gl.zeros([BLOCK_N, HEAD_D], gl.float32, kv_layout)
    mbarrier.wait(kv_ready, 0)
    if PIPE:
        mbarrier.wait(ready.index(0), 0)
        sT, dpT = _issue_s_dp(k_smem, v_smem, q_bufs.index(0), do_bufs.index(0), s_layout, BLOCK_M, BLOCK_N)
        for c in range(0, hi - lo - 1):
            dk, dv, sT, dpT = _bwd_step(c, _m_block(c, lo, hi, REVERSE), sT, dpT, dk, dv, q_bufs, do_bufs, k_smem,
                                        v_smem, ds_smem, dq_smem, ready, empty, dq_desc, dq_ptr, lse_src, delta_src,
                                        qk_scale, bh, n0, N, CAUSAL, BLOCK_M, BLOCK_N, HEAD_D, STAGES, DQ_WN,
                                        DS_TRANS, DQ_TMA, True, True, LSE_SMEM, WG_LOCAL, DQ_WAIT_LATE, False,
                                        False, MASK_FIRST, DV_LATE, LSE_LOG2)
        dk, dv = _bwd_step(hi - lo - 1, _m_block(hi - lo - 1, lo, hi, REVERSE), sT, dpT, dk, dv, q_bufs, do_bufs,
                           k_smem, v_smem, ds_smem, dq_smem, ready, empty, dq_desc, dq_ptr, lse_src, delta_src,
                           qk_scale, bh, n0, N, CAUSAL, BLOCK_M, BLOCK_N, HEAD_D, STAGES, DQ_WN, DS_TRANS, DQ_TMA,
                           True, False, LSE_SMEM, WG_LOCAL, DQ_WAIT_LATE, False, False, MASK_FIRST, DV_LATE,
                           LSE_LOG2)
    elif MASK_SPLIT:
        # the blocks that need the mask, known before the loop: all of them when the CTA's keys run past N, else
        # (causal) the first ones, on the diagonal, and the last one when N is not a multiple of BLOCK_M. Three
        # loops, so that the middle one, most of the work, has no mask and no branch in its trip.
        gl.static_assert(not REVERSE, "MASK_SPLIT walks the query blocks upwards")
        n_blk = hi - lo
        if CAUSAL:
            front = gl.minimum(gl.cdiv(n0 + BLOCK_N, BLOCK_M) - lo, n_blk)
        else:
            front = n_blk * 0
        keys_past_n = (n0 + BLOCK_N > N).to(gl.int32)
        front = keys_past_n * n_blk + (1 - keys_past_n) * front
        tail = ((N % BLOCK_M != 0) & (front < n_blk)).to(gl.int32)
        for c in range(0, front):
            dk, dv = _bwd_step(c, lo + c, None, None, dk, dv, q_bufs, do_bufs, k_smem, v_smem, ds_smem, dq_smem,
                               ready, empty, dq_desc, dq_ptr, lse_src, delta_src, qk_scale, bh, n0, N,
                               CAUSAL, BLOCK_M, BLOCK_N, HEAD_D, STAGES, DQ_WN, DS_TRANS, DQ_TMA, False, False,
                               LSE_SMEM, WG_LOCAL, DQ_WAIT_LATE, True, True, MASK_FIRST, DV_LATE, LSE_LOG2)
        for c in range(front, n_blk - tail):
            dk, dv = _bwd_step(c, lo + c, None, None, dk, dv, q_bufs, do_bufs, k_smem, v_smem, ds_smem, dq_smem,
                               ready, empty, dq_desc, dq_ptr, lse_src, delta_src, qk_scale, bh, n0, N,
                               CAUSAL, BLOCK_M, BLOCK_N, HEAD_D, STAGES, DQ_WN, DS_TRANS, DQ_TMA, False, False,
                               LSE_SMEM, WG_LOCAL, DQ_WAIT_LATE, True, False, MASK_FIRST, DV_LATE, LSE_LOG2)
        for c in range(n_blk - tail, n_blk):
            dk, dv = _bwd_step(c, lo + c, None, None, dk, dv, q_bufs, do_bufs, k_smem, v_smem, ds_smem, dq_smem,
                               ready, empty, dq_desc, dq_ptr, lse_src, delta_src, qk_scale, bh, n0, N,
                               CAUSAL, BLOCK_M, BLOCK_N, HEAD_D, STAGES, DQ_WN, DS_TRANS, DQ_TMA, False, False,
                               LSE_SMEM, WG_LOCAL, DQ_WAIT_LATE, True, True, MASK_FIRST, DV_LATE, LSE_LOG2)
    else:
        for c in range(0, hi - lo):
            dk, dv = _bwd_step(c, _m_block(c, lo, hi, REVERSE), None, None, dk, dv, q_bufs, do_bufs, k_smem, v_smem,
                               ds_smem, dq_smem, ready, empty, dq_desc, dq_ptr, lse_src, delta_src, qk_scale, bh, n0, N,
                               CAUSAL, BLOCK_M, BLOCK_N, HEAD_D, STAGES, DQ_WN, DS_TRANS, DQ_TMA, False, False,
                               LSE_SMEM, WG_LOCAL, DQ_WAIT_LATE, False, False, MASK_FIRST, DV_LATE, LSE_LOG2)
    if DQ_TMA:
        tma.store_wait(0)                            # the last dQ add has read dq_smem before the CTA exits

    rows = n0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, kv_layout))
    cols = gl.arange(0, HEAD_D, layout=gl.SliceLayout(0, kv_layout))
    off = gl.expand_dims((bh * N + rows).to(gl.int64) * HEAD_D, 1) + gl.expand_dims(cols, 0)
    mask = gl.expand_dims(rows < N, 1) & gl.expand_dims(cols < HEAD_D, 0)
    # writes dK once: BLOCK_N*d elements per CTA (N*d per head; rows past N dropped)
    gl.store(dk_ptr + off, (dk * sm_scale).to(dtype), mask=mask)
    # writes dV once: BLOCK_N*d elements per CTA
    gl.store(dv_ptr + off, dv.to(dtype), mask=mask)


@gluon.jit(do_not_specialize=["N", "N_LSE", "n_kblk"])
def attn_bwd_sm90(q_desc, do_desc, k_desc, v_desc, dq_desc, lse_desc, delta_desc, dq_ptr, dk_ptr, dv_ptr, lse_ptr,
                  delta_ptr, qk_scale, sm_scale, N, N_LSE, n_kblk, CAUSAL: gl.constexpr, BLOCK_M: gl.constexpr,
                  BLOCK_N: gl.constexpr, HEAD_D: gl.constexpr, STAGES: gl.constexpr, DQ_WN: gl.constexpr,
                  DS_TRANS: gl.constexpr, DQ_TMA: gl.constexpr, PIPE: gl.constexpr, REVERSE: gl.constexpr,
                  DS_LAYOUT: gl.constexpr, LSE_SMEM: gl.constexpr = False, WG_LOCAL: gl.constexpr = False,
                  DQ_WAIT_LATE: gl.constexpr = False, MASK_SPLIT: gl.constexpr = False,
                  MASK_FIRST: gl.constexpr = False, DV_LATE: gl.constexpr = False, LSE_LOG2: gl.constexpr = False):
    """Allocate K, V, the Q/dO ring (LSE_SMEM: with L and delta slots), the dS tile, the dQ tile and the mbarriers,
    then fork into producer and compute. The two compute warpgroups are one 8-warp partition sharing one dS tile.
    LSE_SMEM: L and delta come through the ring with Q and dO (TMA), so the compute warps read them from shared
    memory when they use them instead of holding a global load's registers across the wgmma issue (at d=128 they
    spill); otherwise the compute warps load them by pointer (``lse_ptr``, ``delta_ptr``, rows of N)."""
    gl.static_assert(BLOCK_N == 128, "two warpgroups of 64 keys")
    dtype: gl.constexpr = q_desc.dtype
    k_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, HEAD_D], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, HEAD_D], v_desc.layout)
    q_bufs = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_M, HEAD_D], q_desc.layout)
    do_bufs = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_M, HEAD_D], do_desc.layout)
    if LSE_SMEM:
        lse_src = gl.allocate_shared_memory(gl.float32, [STAGES, BLOCK_M], lse_desc.layout)
        delta_src = gl.allocate_shared_memory(gl.float32, [STAGES, BLOCK_M], delta_desc.layout)
    else:
        lse_src = lse_ptr
        delta_src = delta_ptr
    if DS_TRANS:
        ds_smem = gl.allocate_shared_memory(dtype, [BLOCK_N, BLOCK_M], DS_LAYOUT)
    else:
        ds_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, BLOCK_N], DS_LAYOUT)
    if DQ_TMA:
        dq_smem = gl.allocate_shared_memory(gl.float32, [BLOCK_M, HEAD_D], dq_desc.layout)   # dQ partial, fp32
    else:
        dq_smem = ds_smem                            # unused: dQ goes out by pointer atomics
    kv_ready = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(kv_ready, count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)       # completed by the TMA byte count
        mbarrier.init(empty.index(i), count=1)       # the compute partition, after a barrier over its warps
    fence_async_shared()
    gl.warp_specialize([
        (_bwd_compute, (q_bufs, do_bufs, k_smem, v_smem, ds_smem, dq_smem, kv_ready, ready, empty,
                        dq_desc, dq_ptr, dk_ptr, dv_ptr, lse_src, delta_src, qk_scale, sm_scale, N, n_kblk,
                        CAUSAL, BLOCK_M, BLOCK_N, HEAD_D, STAGES, DQ_WN, DS_TRANS, DQ_TMA, PIPE, REVERSE, LSE_SMEM,
                        WG_LOCAL, DQ_WAIT_LATE, MASK_SPLIT, MASK_FIRST, DV_LATE, LSE_LOG2)),
        (_bwd_producer, (q_desc, do_desc, k_desc, v_desc, q_bufs, do_bufs, k_smem, v_smem, kv_ready, ready, empty,
                         lse_desc, delta_desc, lse_src, delta_src, N, N_LSE, n_kblk, CAUSAL, BLOCK_M, BLOCK_N,
                         STAGES, REVERSE, LSE_SMEM)),
    ], [1], [24])
