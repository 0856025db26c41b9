"""flashsim.kernels.gluon: GPU-only Hopper (sm_90) attention kernels written in Gluon (``triton.experimental.gluon``).

These kernels spell out what Triton's compiler decides on its own in the course's kernels (chapters 05-12): which
warps load (a producer warp issuing TMA copies into a ring of shared-memory slots, synchronised by mbarriers), which
compute (consumer warpgroups on asynchronous wgmma), and in what order (ping-pong between the consumers, softmax of
one tile overlapped with the matmul of the next, a persistent grid). They run only on a Hopper GPU: Gluon has no
interpreter mode, so they are exempt from the course's rule that every kernel runs on a CPU. Everything here is
imported lazily and guarded: :func:`available` says whether the path can run, and why not when it cannot, so that
``import flashsim.kernels.gluon`` works on any machine (CPU CI runs Triton in the interpreter).

- :func:`available` -> (bool, reason)
- :func:`supports` -> (bool, reason) for given tensors and flags (dtype, head dim, layout)
- :func:`forward_path` -> ("gluon" or "triton", reason): the path selection for given inputs
- :func:`gluon_forward` (q, k, v, causal, sm_scale) -> (o, lse), the convention of
  :func:`flashsim.kernels.flash_forward`: o (B, H, N, d) in q's dtype, lse (B, H, N) fp32 natural-log logsumexp
  of each score row, so that either backward can consume it.
- :func:`backward_path` -> ("gluon" or "triton", reason), and :func:`gluon_backward` (q, k, v, o, lse, do, delta,
  causal, sm_scale) -> (dq, dk, dv), the convention of :func:`flashsim.kernels.flash_backward`
  (:mod:`flashsim.kernels.gluon.bwd_sm90`: K/V resident per CTA, Q/dO streamed by TMA, dQ partials added by TMA
  reduce-adds into an fp32 buffer).
"""
from __future__ import annotations

import functools
import heapq
import os

import numpy as np

from flashsim.model.attention.online_softmax import LOG2E

#: head dims the Gluon forward covers (each a tuned configuration in :data:`FWD_CONFIGS`)
HEAD_DIMS = (64, 128)

#: launch configuration of the forward by (head dim, causal): NC (consumer warpgroups per CTA, 64 query rows each),
#: BLOCK_N (keys per K/V tile), STAGES (K ring slots, and V ring slots unless V_STAGES is given), CONSUMER_REGS
#: (registers per thread of each consumer warpgroup; the producer warp keeps 24), PINGPONG (consumers take turns to
#: issue their wgmma), BALANCED (False: CTA p takes tiles p, p + grid, ...; "list", "lpt" or "section_lpt": each CTA
#: walks its own list of tiles, dealt out by that method of :func:`balanced_tile_lists`). Causal entries deal longest
#: first: under the mask the tiles' lengths differ, and with a fixed stride the busiest CTA has more than the mean
#: work, while the longest-first lists stay within 1 % of it (cost: K/V tiles + 1); non-causal tiles are all alike, so
#: the stride stays. At d=64 each L2 section is dealt before the next ("section_lpt"): over the whole list the CTAs
#: drift apart and hold more heads' K/V than the L2 does, and section by section their DRAM traffic and L2 hit rate
#: come to cuDNN's; at d=128 (half as many heads per section) dealing by section leaves the busiest CTA more work than
#: plain longest-first, so it keeps "lpt". Measurements: benchmarks/results/NOTES.md.
#: Shared memory at d=128: Q 2 x 2 x 16 KB (double-buffered) + K 2 x 32 KB + V 2 x 32 KB = 192 KB. The d=64 entries
#: are the fastest of the candidates that benchmarks/gluon_validate.py --tune times.
FWD_CONFIGS = {
    (64, False): dict(NC=3, BLOCK_N=128, STAGES=3, CONSUMER_REGS=160, PINGPONG=True, BALANCED=False),
    (64, True): dict(NC=2, BLOCK_N=128, STAGES=2, CONSUMER_REGS=240, PINGPONG=False, BALANCED="section_lpt"),
    (128, False): dict(NC=2, BLOCK_N=128, STAGES=2, CONSUMER_REGS=240, PINGPONG=True, BALANCED=False),
    (128, True): dict(NC=2, BLOCK_N=128, STAGES=2, CONSUMER_REGS=240, PINGPONG=True, BALANCED="lpt"),
}


FWD_CONFIGS_DEFAULT = {key: dict(cfg) for key, cfg in FWD_CONFIGS.items()}

#: the keys a forward configuration may set (:data:`FWD_CONFIGS`, ``gluon_forward(config=...)``): those of the
#: entries, PV_WAIT_BLOCK (each consumer waits for its next K slot before it waits for the PV wgmma group, so that
#: the two waits sit in different basic blocks: in one block ptxas schedules the PV wait ahead of the softmax, and
#: none of its exponentials overlap the PV product; off everywhere: it restores the overlap in the SASS but does not
#: change the time, because the second consumer warpgroup's wgmma already fill the tensor cores during a softmax),
#: V_STAGES (V ring slots when they differ from the K ring's STAGES: K is needed one tile before V, so a spare slot
#: goes to K first; unset everywhere: a K ring of 3 beside a V ring of 2 at d=128 did not change the time) and
#: L2_SECTION_BYTES (:data:`L2_SECTION_BYTES`). Measurements: benchmarks/results/NOTES.md.
FWD_CONFIG_KEYS = frozenset().union(*FWD_CONFIGS.values(), ("PV_WAIT_BLOCK", "V_STAGES", "L2_SECTION_BYTES"))

#: launch configurations keyed by N, on top of :data:`FWD_CONFIGS`: (head dim, causal) -> [(lowest N, highest N,
#: overrides), ...], the first matching range wins. d=128: at N <= 2048 the ping-pong turns cost more than they
#: hide (few K/V tiles per query block), and so they do for the causal kernel at N = 16384, while at N = 4096-8192
#: they pay (benchmarks/gluon_validate.py --fwd-by-n times the candidates per N).
FWD_CONFIGS_BY_N = {
    (128, False): [(1, 2048, dict(PINGPONG=False))],
    (128, True): [(1, 2048, dict(PINGPONG=False)), (16384, None, dict(PINGPONG=False))],
}


def forward_config(d: int, causal: bool, N: int, configs: dict | None = None, by_n: dict | None = None) -> dict:
    """The forward's launch configuration for head dim d, mask and sequence length N: ``configs[(d, causal)]``
    with the first matching range of ``by_n[(d, causal)]`` applied (default :data:`FWD_CONFIGS` and
    :data:`FWD_CONFIGS_BY_N`; a recorded run's tables read the same way, chapter 14)."""
    configs = FWD_CONFIGS if configs is None else configs
    by_n = FWD_CONFIGS_BY_N if by_n is None else by_n
    cfg = dict(configs[(d, bool(causal))])
    for lo, hi, overrides in by_n.get((d, bool(causal)), ()):
        if N >= lo and (hi is None or N <= hi):
            cfg.update(overrides)
            break
    return cfg

#: launch configuration of the backward by (head dim, causal): BLOCK_M (query rows per streamed Q/dO tile; the
#: K/V block is always 128 keys, 64 per compute warpgroup), STAGES (Q/dO ring slots), DS_TRANS (dS is written to
#: shared memory as the dSᵀ tile the registers hold, and the dQ matmul reads it transposed; False: transposed in
#: registers first), DQ_TMA (each dQ partial goes out by a TMA reduce-add from shared memory; False: per-element
#: atomics from registers), PIPE (Sᵀ and dPᵀ of the next query block are issued before this block's dQ is waited
#: for; False: each block starts when the one before has gone out), REVERSE (a CTA walks its query blocks from the
#: last down to the diagonal, so that under a causal mask the CTAs of one head read the same Q/dO tiles at the same
#: time), LSE_SMEM (the producer copies L and delta into the Q/dO ring slot by TMA and the compute warps read them
#: from shared memory when they use them, instead of holding a global load's 32 registers across the wgmma issue:
#: no spills at d=128).
#: The entries are the fastest of the candidates benchmarks/gluon_validate.py --bwd --tune times. LSE_SMEM is on in
#: every entry: the whole backward runs faster with it in every row timed (chapter 14 shows the ablation,
#: ``gluon_bwd_lse_smem_h200``). With it, a third Q/dO slot was no faster, and PIPE and REVERSE were slower (with
#: PIPE, ptxas serialises the wgmma pipeline, C7514).
#: At d=64 a query block has 128 rows (BLOCK_M=128): each CTA runs half as many serial per-block chains (Sᵀ/dPᵀ, exp,
#: dV, dS, dK, dS to shared memory, barrier, dQ, TMA add), each wgmma twice as wide; the compute warps hold it in the
#: 240 registers setmaxnreg gives them (ptxas: 20 B of loop-invariant spills), and it is faster than 64-row blocks in
#: every d=64 row timed (chapter 14, ``gluon_bwd_block_h200``). At d=128 dK and dV alone take 128 of those registers,
#: so the blocks stay at 64 rows. Measurements: benchmarks/results/NOTES.md.
#: Shared memory at d=128, BLOCK_M=64, 2 slots: K 32 KB + V 32 KB + Q 2 x 16 KB + dO 2 x 16 KB + dS 16 KB + the
#: fp32 dQ tile 32 KB + L and delta 2 x 2 x 256 B = 177 KB; at d=64, BLOCK_M=128, 2 slots: 16 + 16 + 2 x 16 + 2 x 16
#: + 32 + 32 + 2 KB = 162 KB.
BWD_CONFIGS = {
    (64, False): dict(BLOCK_M=128, STAGES=2, DS_TRANS=True, DQ_TMA=True, PIPE=False, REVERSE=False, LSE_SMEM=True,
                      WG_LOCAL=True, DQ_WAIT_LATE=True),
    (64, True): dict(BLOCK_M=128, STAGES=2, DS_TRANS=True, DQ_TMA=True, PIPE=False, REVERSE=False, LSE_SMEM=True,
                     WG_LOCAL=True, DQ_WAIT_LATE=True),
    (128, False): dict(BLOCK_M=64, STAGES=2, DS_TRANS=True, DQ_TMA=True, PIPE=False, REVERSE=False, LSE_SMEM=True),
    (128, True): dict(BLOCK_M=64, STAGES=2, DS_TRANS=False, DQ_TMA=True, PIPE=False, REVERSE=False, LSE_SMEM=True),
}

#: what :func:`gluon_backward` takes for an option a configuration leaves out. Two options concern the barriers
#: between the two compute warpgroups. Triton's shared-memory barrier pass puts a barrier over both behind wgmma
#: waits of an 8-warp partition (3.9 behind every one), although the kernel's own two barriers per query block already
#: order every shared-memory store against the other warpgroup's reads:
#: - WG_LOCAL: the wgmma waits wait for the calling warpgroup only (``_compat.mma_wait``), so the pass adds none;
#: - DQ_WAIT_LATE: the wait for the previous dQ add's read of the dQ tile moves from before the dS store to the
#:   kernel's barrier after it.
#: Both are on in the d=64 entries, where together they made the backward faster under triton 3.9; at d=128 they
#: made it slower, so they stay off there (measurements: benchmarks/results/NOTES.md).
#: DV_LATE, MASK_SPLIT and MASK_FIRST reorder a block's elementwise work so that the exponentials share their stretch
#: of code with dS (:mod:`.bwd_sm90`'s docstring); screened offline by the static cycles of the trip's machine code,
#: not yet timed, so off in every entry (benchmarks/results/NOTES.md, "The exponentials and dS in one stretch").
#: LSE_LOG2: the prologue stores L·log2(e) (FA4's preprocess does), a multiply less per score row and visit.
BWD_CONFIG_DEFAULTS = dict(DQ_TMA=True, PIPE=False, REVERSE=False, LSE_SMEM=False, MAXNREG=168, WG_LOCAL=False,
                           DQ_WAIT_LATE=False, MASK_SPLIT=False, MASK_FIRST=False, DV_LATE=False,
                           LSE_LOG2=False)

#: L2 bytes one section of the persistent tile order may fill with K and V (the H200 has 60 MB of L2; a third
#: leaves room for the Q, O and the next section's first tiles). ``config={"L2_SECTION_BYTES": ...}`` overrides it
#: per call (a huge value gives one section: the plain longest-first order over all heads).
L2_SECTION_BYTES = 20 * 2 ** 20


def bwd_smem_bytes(d: int, element_bytes: int, BLOCK_M: int, STAGES: int, DQ_TMA: bool = True,
                   LSE_SMEM: bool = False, **_) -> int:
    """Shared memory of one backward CTA: K and V (128 x d each), the Q/dO ring, the dS tile (128 x BLOCK_M), with
    DQ_TMA the fp32 dQ tile (BLOCK_M x d) that the TMA reduce-add reads, and with LSE_SMEM the ring's fp32 L and
    delta slots (BLOCK_M each per slot)."""
    return (element_bytes * (2 * 128 * d + 2 * STAGES * BLOCK_M * d + 128 * BLOCK_M) + (4 * BLOCK_M * d if DQ_TMA else 0)
            + (2 * 4 * STAGES * BLOCK_M if LSE_SMEM else 0))


def _max_regs(nc: int) -> int:
    """Registers per thread at kernel entry: 65536 over the CTA's warpgroups (NC consumers + the producer's),
    rounded down to a multiple of 8; setmaxnreg then moves them from the producer to the consumers."""
    return 65536 // (128 * (nc + 1)) // 8 * 8


@functools.lru_cache(maxsize=None)
def _available_cached(device_index: int) -> tuple[bool, str]:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is a hard dependency
        return False, f"torch is not importable: {exc}"
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return False, "TRITON_INTERPRET is set: Gluon kernels have no interpreter mode (they compile for sm_90 only)"
    if not torch.cuda.is_available():
        return False, "no CUDA GPU: the Gluon kernels compile for Hopper (sm_90) only"
    cap = torch.cuda.get_device_capability(device_index)
    if cap != (9, 0):
        return False, (f"GPU {torch.cuda.get_device_name(device_index)} has compute capability {cap[0]}.{cap[1]}; "
                       "the Gluon kernels use wgmma and setmaxnreg, which need Hopper (9.0)")
    try:
        import inspect

        import triton
        from triton.experimental.gluon import language as gl
        from triton.experimental.gluon.language.nvidia.hopper import (mbarrier, tma,  # noqa: F401
                                                                       warpgroup_mma, warpgroup_mma_wait)
        from triton.experimental.gluon.nvidia.hopper import TensorDescriptor  # noqa: F401
    except ImportError as exc:
        return False, f"triton has no usable Gluon Hopper API: {exc}"
    params = inspect.signature(gl.warp_specialize).parameters
    if "functions_and_args" not in params:
        return False, (f"triton {triton.__version__}'s gl.warp_specialize takes {tuple(params)}, not the "
                       "[(function, args), ...] form these kernels are written for (triton 3.6)")
    if not (hasattr(tma, "async_load") or hasattr(tma, "async_copy_global_to_shared")):
        return False, f"triton {triton.__version__} has neither tma.async_load nor tma.async_copy_global_to_shared"
    try:
        from . import fwd_sm90  # noqa: F401
    except Exception as exc:  # an API change surfaces here, at decoration time
        return False, f"the Gluon forward did not import: {type(exc).__name__}: {exc}"
    return True, f"Hopper GPU {torch.cuda.get_device_name(device_index)} with triton {triton.__version__}'s Gluon"


def available(device=None) -> tuple[bool, str]:
    """(True, what) when the Gluon kernels can run on ``device`` (default: the current CUDA device), else (False,
    why not). Never raises: every import it needs is guarded."""
    try:
        import torch
        index = 0
        if torch.cuda.is_available():
            index = torch.device(device).index if device is not None else torch.cuda.current_device()
            index = torch.cuda.current_device() if index is None else index
    except Exception as exc:  # pragma: no cover
        return False, f"could not query the CUDA device: {exc}"
    return _available_cached(index)


def supports(q, k, v, causal: bool = False) -> tuple[bool, str]:
    """Whether :func:`gluon_forward` covers these inputs: Gluon available on their device, fp16 or bf16, equal
    (B, H, N, d) shapes with d in :data:`HEAD_DIMS`. Non-contiguous inputs are covered (they are copied)."""
    import torch
    if not (isinstance(q, torch.Tensor) and q.is_cuda):
        return False, "the Gluon kernels take CUDA tensors"
    ok, why = available(q.device)
    if not ok:
        return False, why
    if q.dtype not in (torch.float16, torch.bfloat16) or k.dtype != q.dtype or v.dtype != q.dtype:
        return False, f"dtype {q.dtype}: the Gluon forward takes float16 or bfloat16"
    if q.dim() != 4 or q.shape != k.shape or q.shape != v.shape:
        return False, "q, k, v must share one (B, H, N, d) shape"
    if q.shape[-1] not in HEAD_DIMS:
        return False, f"head dim {q.shape[-1]}: the Gluon forward covers d in {HEAD_DIMS}"
    if min(q.shape) < 1:
        return False, "empty input"
    return True, "covered"


def forward_path(q, k, v, causal: bool = False) -> tuple[str, str]:
    """Which forward kernel serves these inputs: ("gluon", why) on Hopper when :func:`supports` covers them, else
    ("triton", why not): the interpreter, a CPU, another GPU, fp32, another head dim. This is the choice
    :func:`flashsim.kernels.flash_forward` makes when it is called without explicit blocks."""
    ok, why = supports(q, k, v, causal)
    return ("gluon", why) if ok else ("triton", why)


@functools.lru_cache(maxsize=None)
def _num_sms(index: int) -> int:
    import torch
    return torch.cuda.get_device_properties(index).multi_processor_count


#: what one output tile costs beyond its K/V tiles, in K/V tiles (its Q load, the first S, the epilogue), for
#: :func:`balanced_tile_lists`
TILE_OVERHEAD_KV_TILES = 1.0


def fwd_tile_list(BH: int, n_mblk: int, sec: int):
    """The persistent forward's tile list: (head, query block) of tile t = 0 .. BH*n_mblk - 1, as int64 numpy
    arrays. The host's copy of the kernel's ``_tile_coords`` (flashsim.kernels.gluon.fwd_sm90): the heads cut into
    sections of ``sec`` whose K and V fit in the L2 together; within a section, query blocks from the last (the
    longest under a causal mask) to the first, heads inner."""
    t = np.arange(BH * n_mblk, dtype=np.int64)
    sec_tiles = sec * n_mblk
    first = (t // sec_tiles) * sec
    heads = np.minimum(sec, BH - first)
    return first + (t % sec_tiles) % heads, n_mblk - 1 - (t % sec_tiles) // heads


def fwd_tile_kv_tiles(N: int, BH: int, n_mblk: int, sec: int, causal: bool, cta_m: int, block_n: int):
    """K/V tiles each output tile of :func:`fwd_tile_list` reads, in list order (the kernel's ``_num_kv_tiles``):
    all of them, or (causal) those up to the block's last row. Returns an int64 numpy array of BH * n_mblk
    entries."""
    _, mblk = fwd_tile_list(BH, n_mblk, sec)
    hi = np.minimum((mblk + 1) * cta_m, N) if causal else np.full_like(mblk, N)
    return -(-hi // block_n)


#: the ways :func:`balanced_tile_lists` deals tiles out (the forward's ``BALANCED`` configuration values)
BALANCE_METHODS = ("list", "lpt", "section_lpt")


def balanced_tile_lists(costs, ctas: int, method: str = "list", section_tiles: int | None = None):
    """Deal tiles out to ``ctas`` persistent CTAs, each tile to the CTA whose tiles so far cost least, taking the
    tiles in list order (``method="list"``: the CTA a dynamic scheduler's atomic counter would hand it to, if the
    costs are right), longest first (``"lpt"``: the longest-processing-time rule, whose largest per-CTA sum is
    within 4/3 of the best possible, and in practice within a tile of it), or longest first within each L2 section
    of ``section_tiles`` consecutive tiles, one section after the other (``"section_lpt"``). Each CTA runs its
    tiles in list order; under ``"lpt"`` a CTA's share of a section depends on the long tiles it drew from all of
    them, so the CTAs drift apart across sections and more heads' K and V are in use at once (on the causal d=64
    forward at N=4096 about 42 heads, 42 MB, against 20 under ``"section_lpt"``): the L2 working set outgrows
    the L2. ``"section_lpt"`` deals each section in full before the next, so every CTA leaves a section within
    about one tile of the others.

    costs: per-tile cost, list order (e.g. :func:`fwd_tile_kv_tiles` + :data:`TILE_OVERHEAD_KV_TILES`); ``ctas``
    <= len(costs), so every CTA gets at least one tile. Returns (order, start) int32 numpy arrays: CTA p's tiles are
    ``order[start[p]:start[p + 1]]``."""
    costs = np.asarray(costs, dtype=np.float64)
    if not 1 <= ctas <= len(costs):
        raise ValueError(f"balanced_tile_lists: {ctas} CTAs for {len(costs)} tiles (need 1 <= ctas <= tiles)")
    if method not in BALANCE_METHODS:
        raise ValueError(f"balanced_tile_lists: method {method!r}, not one of {', '.join(map(repr, BALANCE_METHODS))}")
    if method == "section_lpt":
        if not section_tiles or section_tiles < 1:
            raise ValueError("balanced_tile_lists: method 'section_lpt' needs section_tiles >= 1 (tiles per L2 "
                             "section: heads per section x query blocks per head)")
        deal = np.concatenate([s0 + np.argsort(-costs[s0:s0 + section_tiles], kind="stable")
                               for s0 in range(0, len(costs), section_tiles)])
    else:
        deal = np.argsort(-costs, kind="stable") if method == "lpt" else np.arange(len(costs))
    heap = [(0.0, p) for p in range(ctas)]          # (load so far, CTA): ties go to the lower CTA index
    owner = np.empty(len(costs), dtype=np.int64)
    for i in deal.tolist():
        load, p = heapq.heappop(heap)
        owner[i] = p
        heapq.heappush(heap, (load + costs[i], p))
    order = np.argsort(owner, kind="stable").astype(np.int32)   # by CTA, list order within each
    start = np.zeros(ctas + 1, dtype=np.int32)
    np.cumsum(np.bincount(owner, minlength=ctas), out=start[1:])
    return order, start


@functools.lru_cache(maxsize=64)
def _balanced_schedule(N, BH, n_mblk, sec, causal, cta_m, block_n, ctas, method, device):
    """(order, start) of :func:`balanced_tile_lists` as int32 tensors on ``device``, once per launch shape."""
    import torch
    costs = fwd_tile_kv_tiles(N, BH, n_mblk, sec, causal, cta_m, block_n) + TILE_OVERHEAD_KV_TILES
    order, start = balanced_tile_lists(costs, ctas, method, section_tiles=sec * n_mblk)
    return torch.from_numpy(order).to(device), torch.from_numpy(start).to(device)


@functools.lru_cache(maxsize=None)
def _no_schedule(device):
    """A one-element int32 tensor passed for the schedule arguments when the kernel walks a fixed stride."""
    import torch
    return torch.zeros(1, dtype=torch.int32, device=device)


def gluon_forward(q, k, v, causal: bool = False, sm_scale=None, *, pingpong: bool | None = None,
                  config: dict | None = None, max_ctas: int | None = None):
    """O = softmax(Q Kᵀ · sm_scale) V on Hopper, FA3-style (see :mod:`flashsim.kernels.gluon.fwd_sm90`).

    q, k, v: (B, H, N, d) CUDA tensors, fp16 or bf16, d in :data:`HEAD_DIMS`, any N. Returns (o, lse) in the
    convention of :func:`flashsim.kernels.flash_forward`. ``pingpong`` and ``config`` (keys of :data:`FWD_CONFIG_KEYS`;
    another key raises ``ValueError``)
    override the tuned configuration (:func:`forward_config`: by head dim, mask and N), for the ablation and the
    tuning sweep; ``max_ctas`` caps the persistent grid
    (default: one CTA per SM).
    Raises ``RuntimeError`` with the reason when the inputs are not covered (:func:`supports`).
    """
    import torch
    import triton
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    unknown = set(config or {}) - FWD_CONFIG_KEYS
    if unknown:
        raise ValueError(f"gluon_forward: unknown configuration keys {sorted(unknown)} (known: "
                         f"{sorted(FWD_CONFIG_KEYS)})")
    ok, why = supports(q, k, v, causal)
    if not ok:
        raise RuntimeError(f"gluon_forward: {why}")
    from .fwd_sm90 import attn_fwd_sm90

    B, H, N, d = q.shape
    scale = d ** -0.5 if sm_scale is None else float(sm_scale)
    cfg = forward_config(d, causal, N)
    cfg.update(config or {})
    if pingpong is not None:
        cfg["PINGPONG"] = bool(pingpong)
    consts = fwd_constexprs(cfg, causal, d)
    nc, block_m, block_n = consts["NC"], consts["BLOCK_M"], consts["BLOCK_N"]
    q2, k2, v2 = (t.contiguous().view(B * H * N, d) for t in (q, k, v))
    poison = os.environ.get("FLASHSIM_POISON", "0") not in ("", "0")
    alloc = (lambda shape, dt: torch.full(shape, float("nan"), dtype=dt, device=q.device)) if poison else \
        (lambda shape, dt: torch.empty(shape, dtype=dt, device=q.device))
    o = alloc((B, H, N, d), q.dtype)
    lse = alloc((B, H, N), torch.float32)
    gdt = gl.float16 if q.dtype == torch.float16 else gl.bfloat16
    q_layout = gl.NVMMASharedLayout.get_default_for([block_m, d], gdt)
    kv_layout = gl.NVMMASharedLayout.get_default_for([block_n, d], gdt)
    q_desc = TensorDescriptor.from_tensor(q2, [block_m, d], q_layout)
    k_desc = TensorDescriptor.from_tensor(k2, [block_n, d], kv_layout)
    v_desc = TensorDescriptor.from_tensor(v2, [block_n, d], kv_layout)
    n_mblk = triton.cdiv(N, nc * block_m)
    n_tiles = B * H * n_mblk
    l2_bytes = cfg.get("L2_SECTION_BYTES", L2_SECTION_BYTES)
    sec = max(1, min(B * H, l2_bytes // (2 * N * d * q.element_size())))   # heads per L2 section
    ctas = min(n_tiles, max_ctas or _num_sms(q.device.index if q.device.index is not None else 0))
    if consts["BALANCED"]:
        method = cfg["BALANCED"] if isinstance(cfg["BALANCED"], str) else "list"
        order, start = _balanced_schedule(N, B * H, n_mblk, sec, bool(causal), nc * block_m, block_n, ctas, method,
                                          q.device)
    else:
        order = start = _no_schedule(q.device)
    attn_fwd_sm90[(ctas,)](q_desc, k_desc, v_desc, o, lse, scale * LOG2E, N, B * H, n_mblk, n_tiles, sec, order,
                           start, **consts, num_warps=4, maxnreg=_max_regs(nc))
    return o, lse


def fwd_constexprs(cfg: dict, causal: bool, d: int) -> dict:
    """The forward kernel's compile-time arguments for the full configuration ``cfg`` (:func:`forward_config`
    with any overrides): what :func:`gluon_forward` launches with, and what an offline compile must pass
    (benchmarks/experiments/gluon_compile_sm90.py)."""
    return dict(CAUSAL=bool(causal), NC=cfg["NC"], BLOCK_M=64, BLOCK_N=cfg["BLOCK_N"], HEAD_D=d,
                STAGES=cfg["STAGES"], PINGPONG=bool(cfg["PINGPONG"]), CONSUMER_REGS=cfg["CONSUMER_REGS"],
                BALANCED=bool(cfg.get("BALANCED", False)), PV_WAIT_BLOCK=bool(cfg.get("PV_WAIT_BLOCK", False)),
                V_STAGES=cfg.get("V_STAGES") or cfg["STAGES"])


def fwd_smem_bytes(d: int, element_bytes: int, NC: int, BLOCK_N: int, STAGES: int, V_STAGES: int | None = None,
                   **_) -> int:
    """Shared memory of one forward CTA's tiles: two Q buffers of 64 x d per consumer, the K ring (STAGES slots)
    and the V ring (V_STAGES, default STAGES) of BLOCK_N x d each (the mbarriers add a few hundred bytes). An
    H100/H200 CTA may have 227 KB."""
    return element_bytes * d * (2 * NC * 64 + (STAGES + (V_STAGES or STAGES)) * BLOCK_N)


def bwd_constexprs(cfg: dict, causal: bool, d: int, gdt) -> dict:
    """The backward kernel's compile-time arguments for the full configuration ``cfg`` (:data:`BWD_CONFIG_DEFAULTS`
    under a :data:`BWD_CONFIGS` entry, with any overrides) and the Gluon element type ``gdt`` (fp16 or bf16, which
    the dS tile's shared-memory layout depends on): what :func:`gluon_backward` launches with, and what an offline
    compile must pass (benchmarks/experiments/gluon_compile_sm90.py)."""
    from triton.experimental.gluon import language as gl

    block_m, block_n, ds_trans = cfg["BLOCK_M"], 128, bool(cfg["DS_TRANS"])
    ds_shape = [block_n, block_m] if ds_trans else [block_m, block_n]
    return dict(CAUSAL=bool(causal), BLOCK_M=block_m, BLOCK_N=block_n, HEAD_D=d, STAGES=cfg["STAGES"],
                DQ_WN=1 if block_m == 128 else 2, DS_TRANS=ds_trans, DQ_TMA=bool(cfg["DQ_TMA"]),
                PIPE=bool(cfg["PIPE"]), REVERSE=bool(cfg["REVERSE"]),
                DS_LAYOUT=gl.NVMMASharedLayout.get_default_for(ds_shape, gdt), LSE_SMEM=bool(cfg["LSE_SMEM"]),
                WG_LOCAL=bool(cfg["WG_LOCAL"]), DQ_WAIT_LATE=bool(cfg["DQ_WAIT_LATE"]),
                MASK_SPLIT=bool(cfg["MASK_SPLIT"]), MASK_FIRST=bool(cfg["MASK_FIRST"]), DV_LATE=bool(cfg["DV_LATE"]),
                LSE_LOG2=bool(cfg["LSE_LOG2"]))


#: the keys a backward configuration may set (:data:`BWD_CONFIGS`, ``gluon_backward(config=...)``)
BWD_CONFIG_KEYS = frozenset(BWD_CONFIG_DEFAULTS).union(*BWD_CONFIGS.values())


@functools.lru_cache(maxsize=None)
def _backward_importable() -> tuple[bool, str]:
    try:
        from . import bwd_sm90  # noqa: F401
    except Exception as exc:  # an API change surfaces here, at decoration time
        return False, f"the Gluon backward did not import: {type(exc).__name__}: {exc}"
    return True, "imported"


#: (dtype, head dim, causal) -> smallest N from which ``flash_backward(gluon=None)`` takes the Gluon backward by
#: default: where it was timed faster than the course's Triton backward side by side, in every row timed (fp16 and
#: bf16, N = 2048-16384, d 64 and 128, causal or not; benchmarks/results/NOTES.md).
#: Below N = 2048 it was not timed beside the Triton backward, so those stay on the Triton kernels (``gluon=True``
#: takes the Gluon one anywhere).
BWD_DEFAULT_FROM_N: dict = {(dtype, d, causal): 2048 for dtype in ("float16", "bfloat16") for d in (64, 128)
                            for causal in (False, True)}


def backward_path(q, k, v, causal: bool = False, *, default: bool = False) -> tuple[str, str]:
    """Which backward kernels serve these inputs: ("gluon", why) where :func:`supports` covers them and the Gluon
    backward imports, else ("triton", why not). ``default=True``: the choice :func:`flashsim.kernels.flash_backward`
    makes when it is called with ``gluon=None`` and no launch parameter, which also needs the inputs' (dtype, d,
    causal) in :data:`BWD_DEFAULT_FROM_N` and N at least its entry."""
    ok, why = supports(q, k, v, causal)
    if ok:
        ok, why = _backward_importable()
    if ok and default:
        from_n = BWD_DEFAULT_FROM_N.get((str(q.dtype).replace("torch.", ""), q.shape[-1], bool(causal)))
        if from_n is None or q.shape[-2] < from_n:
            return "triton", ("the Gluon backward was not measured faster than the Triton one here "
                              "(flashsim.kernels.gluon.BWD_DEFAULT_FROM_N); gluon=True takes it")
    return ("gluon", "covered") if ok else ("triton", why)


def gluon_backward(q, k, v, o, lse, do, delta=None, causal: bool = False, sm_scale=None, *,
                   config: dict | None = None):
    """Gradients (dq, dk, dv) of O = softmax(Q Kᵀ · sm_scale) V on Hopper (:mod:`flashsim.kernels.gluon.bwd_sm90`).

    q, k, v, o, do: (B, H, N, d) CUDA tensors, fp16 or bf16, d in :data:`HEAD_DIMS`, any N; lse: (B, H, N) fp32,
    the forward's natural-log logsumexp; delta: (B, H, N) fp32 rowsum(dO ∘ O) (None: computed here, in the
    prologue).
    ``config`` overrides keys of :data:`BWD_CONFIGS` (the tuning sweep; a key outside :data:`BWD_CONFIG_KEYS`
    raises ``ValueError``). Three launches (:mod:`flashsim.kernels.gluon.bwd_host`): one prologue pass (delta, the
    padded L/delta rows LSE_SMEM reads, the fp32 dQ accumulator zeroed), the main kernel (dQ accumulated in fp32
    from every K/V block), one epilogue pass (dQ scaled and rounded once).
    Raises ``RuntimeError`` with the reason when the inputs are not covered (:func:`backward_path`).
    """
    unknown = set(config or {}) - BWD_CONFIG_KEYS
    if unknown:
        raise ValueError(f"gluon_backward: unknown configuration keys {sorted(unknown)} (known: "
                         f"{sorted(BWD_CONFIG_KEYS)})")
    path, why = backward_path(q, k, v, causal)
    if path != "gluon":
        raise RuntimeError(f"gluon_backward: {why}")
    from .bwd_host import bwd_prologue, dq_epilogue

    B, H, N, d = q.shape
    if o.shape != q.shape or do.shape != q.shape or tuple(lse.shape) != (B, H, N):
        raise RuntimeError("gluon_backward: o and do must have q's shape, lse (B, H, N)")
    scale = d ** -0.5 if sm_scale is None else float(sm_scale)
    cfg = {**BWD_CONFIG_DEFAULTS, **BWD_CONFIGS[(d, bool(causal))], **(config or {})}
    # LSE_SMEM: L and delta as rows of N rounded up to 4 fp32, so that every TMA copy of them starts 16-byte aligned
    # (else the copy is an illegal instruction); the pointer-load kernel reads rows of N
    # LSE_LOG2: the prologue stores L·log2(e), so that the kernel does not scale it on every visit
    lse_rows, delta_rows, dq_acc = bwd_prologue(o, do, lse, delta, n_lse=None if cfg["LSE_SMEM"] else N,
                                                lse_log2=cfg["LSE_LOG2"])
    dk, dv = _bwd_main(q, k, v, do, lse_rows, delta_rows, dq_acc, causal, scale, cfg)
    return dq_epilogue(dq_acc, scale, q.dtype), dk, dv


def _bwd_main(q, k, v, do, lse_rows, delta_rows, dq_acc, causal, scale, cfg):
    """The main backward kernel (:func:`~flashsim.kernels.gluon.bwd_sm90.attn_bwd_sm90`) under the full
    configuration ``cfg``: adds the unscaled dQ into ``dq_acc`` ((B, H, N, d) fp32, zeroed by the caller) and
    returns (dk, dv). lse_rows, delta_rows: (B*H, N_LSE) fp32, N_LSE = N without LSE_SMEM."""
    import torch
    import triton
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    from .bwd_sm90 import attn_bwd_sm90

    B, H, N, d = q.shape
    gdt = gl.float16 if q.dtype == torch.float16 else gl.bfloat16
    consts = bwd_constexprs(cfg, causal, d, gdt)
    block_m, block_n, lse_smem = consts["BLOCK_M"], consts["BLOCK_N"], consts["LSE_SMEM"]
    q2, k2, v2, do2 = (t.contiguous().view(B * H * N, d) for t in (q, k, v, do))
    n_lse = lse_rows.shape[-1]
    if not lse_smem and n_lse != N:
        raise ValueError(f"without LSE_SMEM the kernel reads rows of N = {N}, not {n_lse}")
    poison = os.environ.get("FLASHSIM_POISON", "0") not in ("", "0")
    alloc = (lambda: torch.full((B, H, N, d), float("nan"), dtype=q.dtype, device=q.device)) if poison else \
        (lambda: torch.empty((B, H, N, d), dtype=q.dtype, device=q.device))
    dk, dv = alloc(), alloc()
    qdo_layout = gl.NVMMASharedLayout.get_default_for([block_m, d], gdt)
    kv_layout = gl.NVMMASharedLayout.get_default_for([block_n, d], gdt)
    q_desc = TensorDescriptor.from_tensor(q2, [block_m, d], qdo_layout)
    do_desc = TensorDescriptor.from_tensor(do2, [block_m, d], qdo_layout)
    k_desc = TensorDescriptor.from_tensor(k2, [block_n, d], kv_layout)
    v_desc = TensorDescriptor.from_tensor(v2, [block_n, d], kv_layout)
    dq_desc = TensorDescriptor.from_tensor(dq_acc.view(B * H * N, d), [block_m, d],
                                           gl.NVMMASharedLayout.get_default_for([block_m, d], gl.float32))
    if lse_smem:
        # L and delta as 1-D fp32 rows for the producer's TMA copies, BLOCK_M per query block, each copy starting at
        # (row of head bh) + i*BLOCK_M
        vec_layout = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=32, rank=1)
        lse_desc = TensorDescriptor.from_tensor(lse_rows.view(-1), [block_m], vec_layout)
        delta_desc = TensorDescriptor.from_tensor(delta_rows.view(-1), [block_m], vec_layout)
    else:
        lse_desc = delta_desc = dq_desc              # unused placeholders (the kernel reads L and delta by pointer)
    n_kblk = triton.cdiv(N, block_n)
    attn_bwd_sm90[(n_kblk * B * H,)](q_desc, do_desc, k_desc, v_desc, dq_desc, lse_desc, delta_desc, dq_acc, dk, dv,
                                     lse_rows, delta_rows, scale * LOG2E, scale, N, n_lse, n_kblk, **consts,
                                     num_warps=8, maxnreg=cfg["MAXNREG"])
    return dk, dv


__all__ = ["available", "supports", "forward_path", "gluon_forward", "backward_path", "gluon_backward",
           "forward_config", "balanced_tile_lists", "BALANCE_METHODS", "fwd_tile_list", "fwd_tile_kv_tiles",
           "TILE_OVERHEAD_KV_TILES", "HEAD_DIMS", "FWD_CONFIGS", "FWD_CONFIG_KEYS", "FWD_CONFIGS_BY_N",
           "fwd_constexprs", "fwd_smem_bytes", "bwd_constexprs", "BWD_CONFIGS", "BWD_CONFIG_KEYS",
           "BWD_CONFIG_DEFAULTS", "BWD_DEFAULT_FROM_N"]
