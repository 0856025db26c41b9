"""The CPU view (course chapter 10): FlashAttention forward on a CPU, where the caches play SRAM.

On a GPU, FlashAttention keeps a Q block, a K/V block and the score tile in an SM's shared memory (SRAM) and never
writes the N x N score matrix S to HBM. A CPU has the same kind of hierarchy: DRAM is slow and large, each core's
L2 cache is small and fast (here it plays SRAM, as :func:`flashsim.model.hardware.cpu_preset` says), and L1 plus the
registers are smaller and faster still. So the same algorithm works here:

* :func:`naive_attention_numpy` is standard attention (the course's Algorithm 0): it materializes the N x N matrix
  S = Q K^T, softmaxes it row by row and multiplies by V. Its extra memory is Theta(N^2).
* :func:`flash_attention_cpu` is blocked FlashAttention forward with the online softmax (chapters 04 and 05),
  compiled with numba. Each Q block is one task, and the tasks run in parallel on the cores (a CPU core plays the
  part of an SM running one thread block). For each K/V block the task computes the score tile
  ``S = Q_blk K_blk^T`` in a small buffer, updates the running row max ``m`` and row sum ``l``, rescales its
  output accumulator and adds ``P V_blk``. Its extra memory is O(N d): padded copies of Q, K^T and V, the output,
  and a few (block_r x block_c) tiles per core. No N x N array is ever allocated.

How it is made fast (what chapter 10 discusses):

* the two small matrix products per tile (``Q_blk K_blk^T`` and ``P V_blk``) run in a register-blocked
  micro-kernel: 4 rows x 64 columns of accumulators stay in 16 AVX-512 registers (4 x 16 in 8 AVX2 registers on
  CPUs without AVX-512) while the inner loop streams over the shared dimension. It is emitted as LLVM vector code
  by a numba intrinsic, because numba's auto-vectorizer does not keep accumulators in registers across a loop;
* K is transposed once (O(N d) extra) so the score tile's columns are contiguous;
* the scale ``sm_scale * log2(e)`` is folded into Q once, so the softmax uses ``2**x``, computed by a vectorizable
  polynomial (numba has no vector ``exp`` without Intel SVML);
* the softmax pass is fused: one loop per row finds the new max, exponentiates in place and sums;
* masked entries (causal, or columns past N) are never given -inf: the loops stop at the last valid column, and the
  probabilities past it are set to 0, so ``fastmath`` (which assumes no infinities) stays safe;
* rows and columns are padded to the micro-kernel's tile (4 rows, 16 columns) once, up front, so there are no
  per-block copies and no ragged edge cases inside the hot loop.

Block sizes default to :func:`default_blocks`, which sizes them from the CPU preset's caches.
"""
from __future__ import annotations

import functools
import math

import numpy as np
from llvmlite import ir
from numba import get_num_threads, get_thread_id, njit, prange, set_parallel_chunksize, types
from numba.core import cgutils
from numba.extending import intrinsic

from flashsim.errors import FlashsimError

__all__ = [
    "flash_attention_cpu",
    "naive_attention_numpy",
    "default_blocks",
    "effective_blocks",
    "flash_extra_bytes",
    "naive_extra_bytes",
    "TILE_ROWS",
    "TILE_COLS",
]

#: Rows of Q (and of the output) one micro-kernel call handles: block_r is rounded up to a multiple of this.
TILE_ROWS = 4
#: Columns in one SIMD vector (16 float32 = one AVX-512 register): block_c and d are padded to multiples of this.
TILE_COLS = 16


def _simd_shape() -> tuple[int, int]:
    """(float32 lanes per vector, vectors per micro-kernel row) for this CPU.

    AVX-512 has 32 registers of 16 floats: 4 rows x 4 vectors = 16 accumulators plus 4 loaded vectors and a
    broadcast fit. Elsewhere (AVX2: 16 registers of 8 floats; Arm NEON) 8-float vectors, 2 per row, keep the
    accumulators from spilling to memory.
    """
    try:
        from llvmlite import binding

        if binding.get_host_cpu_features().get("avx512f", False):
            return 16, 4
    except Exception:  # noqa: BLE001 - feature detection is best effort; the fallback is always correct
        pass
    return 8, 2


_VEC, _MAX_V = _simd_shape()
_PANEL = max(_VEC * _MAX_V, TILE_COLS)  # columns per panel of the packed K^T (a multiple of TILE_COLS)

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
# fastmath: "reassoc" lets LLVM vectorize the row max and row sum; "ninf"/"nnan" are safe because no -inf or NaN is
# ever produced (masked entries are skipped, the running max starts at -1e30, 2**x is clamped to 0 below -127).
_FASTMATH = {"nnan", "ninf", "nsz", "arcp", "contract", "afn", "reassoc"}


# --------------------------------------------------------------------------------------------------------------
# Micro-kernel: C[R x 16V] (+)= A[R x K] @ B[K x 16V], accumulators held in vector registers.
# --------------------------------------------------------------------------------------------------------------
def _make_gemm_kernel(nvec: int, accumulate: bool):
    """A numba intrinsic computing a TILE_ROWS x (16*nvec) block of C = A @ B (or C += A @ B).

    All three arrays are 1-D float32 (flattened row-major matrices); element (r, k) of A sits at
    ``a_off + r*lda + k``, element (k, c) of B at ``b_off + k*ldb + c`` and element (r, c) of C at
    ``c_off + r*ldc + c``. Per step of the shared dimension it loads ``nvec`` vectors of B's row once and
    multiplies them by 4 broadcast scalars of A: 4*nvec fused multiply-adds per 4 + nvec loads.
    """
    rows = TILE_ROWS

    @intrinsic
    def gemm(typingctx, c, c_off, ldc, a, a_off, lda, b, b_off, ldb, kdim):
        sig = types.void(c, c_off, ldc, a, a_off, lda, b, b_off, ldb, kdim)

        def codegen(context, builder, signature, args):
            c_arr, c_off_v, ldc_v, a_arr, a_off_v, lda_v, b_arr, b_off_v, ldb_v, k_v = args
            i64 = ir.IntType(64)
            f32 = ir.FloatType()
            vty = ir.VectorType(f32, _VEC)

            def data(arr, ty):
                return cgutils.create_struct_proxy(ty)(context, builder, value=arr).data

            cptr = data(c_arr, signature.args[0])
            aptr = data(a_arr, signature.args[3])
            bptr = data(b_arr, signature.args[6])
            c_off_v, ldc_v, a_off_v, lda_v, b_off_v, ldb_v, k_v = (
                builder.sext(x, i64) if x.type.width < 64 else x
                for x in (c_off_v, ldc_v, a_off_v, lda_v, b_off_v, ldb_v, k_v))

            def vptr(base, offset):
                return builder.bitcast(builder.gep(base, [offset], inbounds=True), vty.as_pointer())

            accs = [[cgutils.alloca_once(builder, vty) for _ in range(nvec)] for _ in range(rows)]
            for r in range(rows):
                row_off = builder.add(c_off_v, builder.mul(ldc_v, ir.Constant(i64, r)))
                for v in range(nvec):
                    if accumulate:
                        init = builder.load(vptr(cptr, builder.add(row_off, ir.Constant(i64, v * _VEC))), align=4)
                    else:
                        init = ir.Constant(vty, [0.0] * _VEC)
                    builder.store(init, accs[r][v])
            fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vty, [vty, vty, vty]),
                                                 f"llvm.fma.v{_VEC}f32")
            undef = ir.Constant(vty, ir.Undefined)
            zero_mask = ir.Constant(ir.VectorType(ir.IntType(32), _VEC), [0] * _VEC)
            with cgutils.for_range(builder, k_v) as loop:
                kk = loop.index
                brow = builder.add(b_off_v, builder.mul(kk, ldb_v))
                bvecs = [builder.load(vptr(bptr, builder.add(brow, ir.Constant(i64, v * _VEC))), align=4)
                         for v in range(nvec)]
                for r in range(rows):
                    aidx = builder.add(builder.add(a_off_v, builder.mul(lda_v, ir.Constant(i64, r))), kk)
                    ascal = builder.load(builder.gep(aptr, [aidx], inbounds=True), align=4)
                    abc = builder.shuffle_vector(builder.insert_element(undef, ascal, ir.Constant(i64, 0)),
                                                 undef, zero_mask)
                    for v in range(nvec):
                        acc = builder.load(accs[r][v])
                        builder.store(builder.call(fma, [abc, bvecs[v], acc]), accs[r][v])
            for r in range(rows):
                row_off = builder.add(c_off_v, builder.mul(ldc_v, ir.Constant(i64, r)))
                for v in range(nvec):
                    builder.store(builder.load(accs[r][v]),
                                  vptr(cptr, builder.add(row_off, ir.Constant(i64, v * _VEC))), align=4)
            return context.get_dummy_value()

        return sig, codegen

    return gemm


# one intrinsic per width (1 to 4 vectors: the dispatch below never asks for more than _MAX_V)
_gemm_set_1 = _make_gemm_kernel(1, False)
_gemm_set_2 = _make_gemm_kernel(2, False)
_gemm_set_3 = _make_gemm_kernel(3, False)
_gemm_set_4 = _make_gemm_kernel(4, False)
_gemm_acc_1 = _make_gemm_kernel(1, True)
_gemm_acc_2 = _make_gemm_kernel(2, True)
_gemm_acc_3 = _make_gemm_kernel(3, True)
_gemm_acc_4 = _make_gemm_kernel(4, True)


@njit(inline="always")
def _gemm_tile(accumulate, c, c_off, ldc, a, a_off, lda, b, b_off, ldb, kdim, ncols):
    """C[4 x ncols] (+)= A[4 x kdim] @ B[kdim x ncols], ncols a multiple of 16, in chunks of up to 64 columns."""
    col = 0
    while col < ncols:
        nv = min((ncols - col) // _VEC, _MAX_V)
        if accumulate:
            if nv == 4:
                _gemm_acc_4(c, c_off + col, ldc, a, a_off, lda, b, b_off + col, ldb, kdim)
            elif nv == 3:
                _gemm_acc_3(c, c_off + col, ldc, a, a_off, lda, b, b_off + col, ldb, kdim)
            elif nv == 2:
                _gemm_acc_2(c, c_off + col, ldc, a, a_off, lda, b, b_off + col, ldb, kdim)
            else:
                _gemm_acc_1(c, c_off + col, ldc, a, a_off, lda, b, b_off + col, ldb, kdim)
        else:
            if nv == 4:
                _gemm_set_4(c, c_off + col, ldc, a, a_off, lda, b, b_off + col, ldb, kdim)
            elif nv == 3:
                _gemm_set_3(c, c_off + col, ldc, a, a_off, lda, b, b_off + col, ldb, kdim)
            elif nv == 2:
                _gemm_set_2(c, c_off + col, ldc, a, a_off, lda, b, b_off + col, ldb, kdim)
            else:
                _gemm_set_1(c, c_off + col, ldc, a, a_off, lda, b, b_off + col, ldb, kdim)
        col += nv * _VEC


# --------------------------------------------------------------------------------------------------------------
# 2**x for x <= 0, vectorizable (numba has no vector exp without Intel SVML).
# --------------------------------------------------------------------------------------------------------------
@intrinsic
def _int_bits_as_float32(typingctx, x):
    """Reinterpret the low 32 bits of an integer as a float32 (a bit cast, not a conversion)."""
    if not isinstance(x, types.Integer):
        return None
    sig = types.float32(x)

    def codegen(context, builder, signature, args):
        (val,) = args
        if val.type.width != 32:
            val = builder.trunc(val, ir.IntType(32))
        return builder.bitcast(val, ir.FloatType())

    return sig, codegen


@intrinsic
def _fmax(typingctx, a, b):
    """max(a, b) of two float32 as llvm.maxnum: unlike a compare-and-select, LLVM vectorizes it as a reduction."""
    if a != types.float32 or b != types.float32:
        return None
    sig = types.float32(types.float32, types.float32)

    def codegen(context, builder, signature, args):
        f32 = ir.FloatType()
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(f32, [f32, f32]), "llvm.maxnum.f32")
        return builder.call(fn, args, fastmath=("fast",))

    return sig, codegen


def _exp2_coefficients(degree: int = 6) -> tuple:
    """Least-squares fit (Chebyshev nodes) of 2**f on [-1/2, 1/2]: relative error ~1e-9, below float32's eps."""
    f = 0.5 * np.cos(np.pi * (np.arange(200) + 0.5) / 200)
    weights = 1.0 / np.exp2(f)
    coef = np.linalg.lstsq(np.vander(f, degree + 1, increasing=True) * weights[:, None], np.ones_like(f),
                           rcond=None)[0]
    return tuple(float(c) for c in coef)


_C0, _C1, _C2, _C3, _C4, _C5, _C6 = _exp2_coefficients()


@njit(fastmath=_FASTMATH, inline="always")
def _exp2(x):
    """2**x in float32 for x <= 0; exactly 0 below -126 (no denormals, no -inf needed)."""
    x = _fmax(x, np.float32(-127.0))
    n = np.floor(x + np.float32(0.5))
    f = x - n  # in [-1/2, 1/2]
    p = np.float32(_C6)
    p = p * f + np.float32(_C5)
    p = p * f + np.float32(_C4)
    p = p * f + np.float32(_C3)
    p = p * f + np.float32(_C2)
    p = p * f + np.float32(_C1)
    p = p * f + np.float32(_C0)
    # 2**n from the exponent bits; n = -127 gives the bit pattern of +0.0
    scale = _int_bits_as_float32((np.int32(n) + np.int32(127)) << np.int32(23))
    return p * scale


# --------------------------------------------------------------------------------------------------------------
# The kernel
# --------------------------------------------------------------------------------------------------------------
_NEG_BIG = np.float32(-1.0e30)  # initial running max: finite, so fastmath's no-infinity assumption holds


@njit(inline="always")
def _qk_tile(s, s_off, ldc, qp, q_off, dp, ktp, j, ncols):
    """S[4 x ncols] = Q[4 x dp] @ K^T[dp x ncols] from the packed K^T, in pieces that stay inside one panel."""
    col = 0
    while col < ncols:
        g = j + col
        within = g % _PANEL
        nv = min((ncols - col) // _VEC, (_PANEL - within) // _VEC)
        b_off = (g - within) * dp + within
        if nv == 4:
            _gemm_set_4(s, s_off + col, ldc, qp, q_off, dp, ktp, b_off, _PANEL, dp)
        elif nv == 3:
            _gemm_set_3(s, s_off + col, ldc, qp, q_off, dp, ktp, b_off, _PANEL, dp)
        elif nv == 2:
            _gemm_set_2(s, s_off + col, ldc, qp, q_off, dp, ktp, b_off, _PANEL, dp)
        else:
            _gemm_set_1(s, s_off + col, ldc, qp, q_off, dp, ktp, b_off, _PANEL, dp)
        col += nv * _VEC


@njit(parallel=True, cache=True, fastmath=_FASTMATH)
def _prepare(q, k, v, scale, dp, qp, ktp, vp):
    """Fill the padded copies, once per call (O(N d)): Q*scale, K^T packed in panels, V (padding stays 0).

    K^T is stored as panels of 64 columns: panel p holds K^T[:, 64p:64p+64] contiguously (dp x 64), so the
    micro-kernel streams through 256-byte rows that sit next to each other. Plain K^T (row stride N) would put
    the 64 rows of one tile N*4 bytes apart, all in the same few L1 sets, and thrash the cache.
    """
    bh, n, d = q.shape
    for h in prange(bh):
        for i in range(n):
            for c in range(d):
                qp[h, i * dp + c] = q[h, i, c] * scale
                vp[h, i * dp + c] = v[h, i, c]
        for i0 in range(0, n, _PANEL):
            for c in range(d):
                for i in range(i0, min(i0 + _PANEL, n)):
                    ktp[h, i0 * dp + c * _PANEL + (i - i0)] = k[h, i, c]


@njit(parallel=True, cache=True, fastmath=_FASTMATH)
def _flash_forward(qp, ktp, vp, out, lse, n, d, dp, br, bc, causal, ws_s, ws_acc, ws_ml):
    """Blocked FlashAttention forward with the online softmax; one parallel task per (head, Q block).

    ws_* are per-thread workspaces (row t for thread t): the score tile, the output accumulator, and the running
    max and sum. They are allocated by the caller, so they are counted by tracemalloc like every other array.
    """
    bh = qp.shape[0]
    nqb = (n + br - 1) // br
    ntasks = bh * nqb
    for t in prange(ntasks):
        h = t // nqb
        qb = nqb - 1 - t % nqb  # last Q blocks first: under a causal mask they are the longest
        i0 = qb * br
        rows = min(br, n - i0)
        rows_pad = (rows + TILE_ROWS - 1) // TILE_ROWS * TILE_ROWS
        qh = qp[h]
        kh = ktp[h]
        vh = vp[h]
        tid = get_thread_id()
        s = ws_s[tid]  # score tile, then probabilities P (in place): br x bc
        acc = ws_acc[tid]  # unnormalized output rows: br x dp
        m = ws_ml[tid, 0]  # running row max (log2 units)
        l = ws_ml[tid, 1]  # running row sum
        acc[:] = 0.0
        m[:] = _NEG_BIG
        l[:] = 0.0
        j_end = n
        if causal:
            j_end = min(n, i0 + rows)
        for j0 in range(0, j_end, bc):
            cols = min(bc, n - j0)
            cols_pad = (cols + TILE_COLS - 1) // TILE_COLS * TILE_COLS
            # S = Q_blk @ K_blk^T (already scaled by sm_scale * log2 e)
            for r in range(0, rows_pad, TILE_ROWS):
                _qk_tile(s, r * bc, bc, qh, (i0 + r) * dp, dp, kh, j0, cols_pad)
            # online softmax, fused: new max, exponentiate in place, row sum, rescale the accumulator
            for r in range(rows_pad):
                valid = cols
                if causal:
                    valid = min(cols, i0 + r - j0 + 1)
                valid = max(valid, 0)
                row = s[r * bc:r * bc + cols_pad]  # a view: plain indices keep the loops vectorizable
                m_old = m[r]
                m_new = m_old
                for j in range(valid):
                    m_new = _fmax(m_new, row[j])
                total = np.float32(0.0)
                for j in range(valid):
                    p = _exp2(row[j] - m_new)
                    row[j] = p
                    total += p
                for j in range(valid, cols_pad):
                    row[j] = np.float32(0.0)
                alpha = _exp2(m_old - m_new)
                l[r] = l[r] * alpha + total
                m[r] = m_new
                if alpha != np.float32(1.0):
                    arow = acc[r * dp:(r + 1) * dp]
                    for c in range(dp):
                        arow[c] *= alpha
            # O_blk += P @ V_blk
            for r in range(0, rows_pad, TILE_ROWS):
                _gemm_tile(True, acc, r * dp, dp, s, r * bc, bc, vh, j0 * dp, dp, cols_pad, dp)
        for r in range(rows):
            inv = np.float32(1.0) / l[r]
            for c in range(d):
                out[h, i0 + r, c] = acc[r * dp + c] * inv
            lse[h, i0 + r] = (m[r] + np.log2(l[r])) * np.float32(LN2)


# --------------------------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------------------------
def _round_up(x: int, multiple: int) -> int:
    return (x + multiple - 1) // multiple * multiple


@functools.lru_cache(maxsize=1)
def _cpu_hardware():
    """This machine's CPU preset, read from sysfs once (reading it takes ~0.4 ms, as long as a small attention)."""
    from flashsim.model.hardware import get_device

    return get_device("cpu")


def default_blocks(d: int, hardware=None) -> tuple[int, int]:
    """Block sizes (block_r, block_c) for head dimension ``d``, sized from the CPU preset's caches (chapter 10).

    The rule is the paper's "everything one step touches fits in SRAM", with a CPU core's L2 cache as SRAM
    (``hardware.sram_bytes``, read from sysfs by :func:`flashsim.model.hardware.cpu_preset`). One step of the inner loop
    touches, in float32 (d padded to a multiple of 16):

    * the Q block and its output accumulator: ``2 * block_r * d * 4`` bytes,
    * one K block and one V block: ``2 * block_c * d * 4`` bytes,
    * the score tile S (then P, in place): ``block_r * block_c * 4`` bytes.

    ``block_r`` is 64: a 64 x 64 float32 Q block is 16 KiB, small enough to stay in the 32-48 KiB L1 data cache
    while the K blocks stream past, and N / 64 Q blocks give every core many tasks to share (with dynamic
    scheduling, a core slowed by other work then delays nobody). ``block_c`` is then the largest multiple of 64 (a
    whole number of packed panels of K^T) for which that sum fits in half of the L2 cache, the other half being
    left for what the hardware prefetches, capped at 1024. With 1 MiB of L2 per core and d = 64 that is 64 x 640
    (a 160 KiB S tile, 512 KiB in all). ``benchmarks/cpu_speed.py`` sweeps block_c against the cache sizes: past
    a few hundred columns the time is flat, so the rule is about not being too small, and about staying in L2.

    >>> from flashsim.model.hardware import get_device
    >>> default_blocks(64, get_device("cpu", sram_bytes=1024 * 1024))
    (64, 640)
    """
    if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d <= 0:
        raise FlashsimError(f"d={d!r} must be a positive integer (the head dimension, q.shape[-1])")
    if hardware is None:
        hardware = _cpu_hardware()
    budget = hardware.sram_bytes // 2
    dp = _round_up(int(d), TILE_COLS)
    block_r = 64
    block_c = 64
    for bc in range(64, 1024 + 1, 64):
        if 4 * (2 * block_r * dp + 2 * bc * dp + block_r * bc) <= budget:
            block_c = bc
    return block_r, block_c


def effective_blocks(block_r: int, block_c: int) -> tuple[int, int]:
    """The block sizes the kernel really uses: block_r rounded up to a multiple of 4, block_c to a multiple of 16.

    The micro-kernel computes 4 rows x 16 columns (one AVX-512 register per row) at a time.
    """
    return _round_up(int(block_r), TILE_ROWS), _round_up(int(block_c), TILE_COLS)


def _check_qkv(q, k, v, name="flash_attention_cpu"):
    arrays = {"q": q, "k": k, "v": v}
    for key, arr in arrays.items():
        if not isinstance(arr, np.ndarray):
            raise FlashsimError(f"{name}: {key} is a {type(arr).__name__}; pass a numpy array "
                                f"(for a torch tensor use {key}.numpy())")
        if arr.dtype != np.float32:
            raise FlashsimError(f"{name}: {key} has dtype {arr.dtype}; pass float32 ({key}.astype(np.float32))")
        if arr.ndim not in (2, 4):
            raise FlashsimError(f"{name}: {key} has {arr.ndim} dimensions {arr.shape}; pass (N, d) or "
                                f"(B, H, N, d)")
    if not (q.ndim == k.ndim == v.ndim):
        raise FlashsimError(f"{name}: q, k, v have shapes {q.shape}, {k.shape}, {v.shape}; give all three the "
                            f"same number of dimensions")
    if q.shape != k.shape or k.shape != v.shape:
        raise FlashsimError(f"{name}: q, k, v must have the same shape (self-attention), got {q.shape}, "
                            f"{k.shape}, {v.shape}")
    if q.shape[-2] == 0 or q.shape[-1] == 0 or q.size == 0:
        raise FlashsimError(f"{name}: empty input {q.shape}; N and d must be at least 1")


def _check_block(value, name):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise FlashsimError(f"{name}={value!r} must be a positive integer, or None for default_blocks(d)")
    return int(value)


def flash_attention_cpu(q, k, v, causal=False, sm_scale=None, block_r=None, block_c=None, return_lse=False):
    """FlashAttention forward on the CPU (chapter 10): ``softmax(q k^T * sm_scale) v`` without an N x N array.

    Parameters
    ----------
    q, k, v : float32 arrays of shape (N, d) or (B, H, N, d), all the same shape.
    causal : mask out key j > query i (chapter 08).
    sm_scale : score scale, default ``1 / sqrt(d)``.
    block_r, block_c : Q rows and K/V rows per block; default :func:`default_blocks`. The kernel rounds them up
        to a multiple of 4 and 16 (:func:`effective_blocks`); N need not be a multiple of either.
    return_lse : also return the log-sum-exp of each row's scaled scores, shape (N,) or (B, H, N) (the backward
        pass of chapter 07 uses it). It costs nothing extra: the kernel keeps it anyway.

    Returns the output, float32 with q's shape (and the log-sum-exp as float32 when ``return_lse``).
    Extra memory is O(N d) (see :func:`flash_extra_bytes`), never O(N^2).
    """
    _check_qkv(q, k, v)
    block_r = _check_block(block_r, "block_r")
    block_c = _check_block(block_c, "block_c")
    shape = q.shape
    n, d = shape[-2], shape[-1]
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(d)
    elif not isinstance(sm_scale, (int, float, np.floating, np.integer)) or not math.isfinite(sm_scale) \
            or sm_scale <= 0:
        raise FlashsimError(f"sm_scale={sm_scale!r} must be a positive finite number, or None for 1/sqrt(d)")
    if block_r is None or block_c is None:
        dr, dc = default_blocks(d)
        block_r = block_r or dr
        block_c = block_c or dc
    br, bc = effective_blocks(block_r, block_c)
    dp = _round_up(d, TILE_COLS)
    npad_r = _round_up(n, br) + TILE_ROWS  # a 4-row tile may reach past the last row
    npad_c = _round_up(_round_up(n, bc) + TILE_COLS, _PANEL)
    q3 = q.reshape(-1, n, d)
    k3 = k.reshape(-1, n, d)
    v3 = v.reshape(-1, n, d)
    bh = q3.shape[0]
    # every array is allocated here, by numpy, so tracemalloc sees all of the kernel's memory (chapter 06)
    qp = np.zeros((bh, npad_r * dp), np.float32)
    ktp = np.zeros((bh, dp * npad_c), np.float32)
    vp = np.zeros((bh, npad_c * dp), np.float32)
    _prepare(q3, k3, v3, np.float32(sm_scale * LOG2E), dp, qp, ktp, vp)
    threads = get_num_threads()
    ws_s = np.empty((threads, br * bc), np.float32)
    ws_acc = np.empty((threads, br * dp), np.float32)
    ws_ml = np.empty((threads, 2, br), np.float32)
    out = np.empty((bh, n, d), np.float32)
    lse = np.empty((bh, n), np.float32)
    # hand out the (head, Q block) tasks one at a time (dynamic scheduling): a core busy with something else, or a
    # short causal block, then delays nobody
    old_chunk = set_parallel_chunksize(1)
    try:
        _flash_forward(qp, ktp, vp, out, lse, n, d, dp, br, bc, bool(causal), ws_s, ws_acc, ws_ml)
    finally:
        set_parallel_chunksize(old_chunk)
    out = out.reshape(shape)
    if return_lse:
        return out, lse.reshape(shape[:-1])
    return out


def naive_attention_numpy(q, k, v, causal=False, sm_scale=None, return_lse=False):
    """Standard attention in numpy (Algorithm 0, the chapter-10 baseline): S = q k^T is materialized, N x N.

    Same inputs and outputs as :func:`flash_attention_cpu`; works in the inputs' dtype (float32 here).
    Its extra memory is Theta(N^2) per head: the score matrix S (softmaxed in place).
    """
    _check_qkv(q, k, v, name="naive_attention_numpy")
    n, d = q.shape[-2], q.shape[-1]
    scale = np.float32(1.0 / math.sqrt(d) if sm_scale is None else sm_scale)
    s = q @ np.swapaxes(k, -1, -2)
    s *= scale
    if causal:
        s[..., np.triu(np.ones((n, n), dtype=bool), 1)] = -np.inf
    row_max = s.max(axis=-1, keepdims=True)
    s -= row_max
    np.exp(s, out=s)
    row_sum = s.sum(axis=-1, keepdims=True)
    s /= row_sum
    out = s @ v
    if return_lse:
        return out, (row_max + np.log(row_sum))[..., 0]
    return out


def flash_extra_bytes(n: int, d: int, block_r: int | None = None, block_c: int | None = None,
                      batch_heads: int = 1, threads: int | None = None) -> int:
    """Bytes :func:`flash_attention_cpu` allocates besides its output, counted from its array shapes.

    Padded Q, K^T and V (O(N d)), the log-sum-exp (O(N)), and per parallel task one S tile, one accumulator and two
    row vectors (O(block_r * (block_c + d))), times the number of tasks alive at once (one per thread).
    """
    if block_r is None or block_c is None:
        dr, dc = default_blocks(d)
        block_r, block_c = block_r or dr, block_c or dc
    br, bc = effective_blocks(block_r, block_c)
    dp = _round_up(d, TILE_COLS)
    npad_r = _round_up(n, br) + TILE_ROWS
    npad_c = _round_up(_round_up(n, bc) + TILE_COLS, _PANEL)
    if threads is None:
        import numba

        threads = numba.get_num_threads()
    prepared = 4 * batch_heads * (npad_r * dp + 2 * npad_c * dp)
    lse = 4 * batch_heads * n
    per_task = 4 * (br * bc + br * dp + 2 * br)
    return prepared + lse + threads * per_task


def naive_extra_bytes(n: int, d: int, batch_heads: int = 1) -> int:
    """Bytes :func:`naive_attention_numpy` allocates besides its output: the N x N score matrix (float32)."""
    return 4 * batch_heads * n * n
