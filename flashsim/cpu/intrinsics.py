"""The numba micro-kernel intrinsics of the CPU kernel (chapter 10): a register-blocked GEMM tile, emitted as LLVM
vector code, and a vectorizable 2**x.

The two small matrix products per tile (``Q_blk K_blk^T`` and ``P V_blk``) keep 4 rows x 64 columns of
accumulators in 16 AVX-512 registers (4 x 16 in 8 AVX2 registers elsewhere) while the inner loop streams over the
shared dimension: numba's auto-vectorizer does not keep accumulators in registers across a loop, hence the
intrinsic. numba has no vector ``exp`` without Intel SVML, hence the polynomial ``2**x``.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from flashsim.cpu.blocks import _MAX_V, _VEC, TILE_ROWS

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


def _by_width(gemm_1, gemm_2, gemm_3, gemm_4):
    """One jitted call ``gemm(nv, c, c_off, ldc, a, a_off, lda, b, b_off, ldb, kdim)`` that runs the intrinsic of
    width ``nv`` (1 to 4 vectors) of one family: each intrinsic is its own compile-time function, so numba needs
    the branch; written once here for both families."""
    @njit(inline="always")
    def gemm(nv, c, c_off, ldc, a, a_off, lda, b, b_off, ldb, kdim):
        if nv == 4:
            gemm_4(c, c_off, ldc, a, a_off, lda, b, b_off, ldb, kdim)
        elif nv == 3:
            gemm_3(c, c_off, ldc, a, a_off, lda, b, b_off, ldb, kdim)
        elif nv == 2:
            gemm_2(c, c_off, ldc, a, a_off, lda, b, b_off, ldb, kdim)
        else:
            gemm_1(c, c_off, ldc, a, a_off, lda, b, b_off, ldb, kdim)
    return gemm


_gemm_set = _by_width(_gemm_set_1, _gemm_set_2, _gemm_set_3, _gemm_set_4)  # C = A @ B, nv vectors wide
_gemm_acc = _by_width(_gemm_acc_1, _gemm_acc_2, _gemm_acc_3, _gemm_acc_4)  # C += A @ B, nv vectors wide


@njit(inline="always")
def _gemm_tile(accumulate, c, c_off, ldc, a, a_off, lda, b, b_off, ldb, kdim, ncols):
    """C[4 x ncols] (+)= A[4 x kdim] @ B[kdim x ncols], ncols a multiple of 16, in chunks of up to 64 columns."""
    col = 0
    while col < ncols:
        nv = min((ncols - col) // _VEC, _MAX_V)
        if accumulate:
            _gemm_acc(nv, c, c_off + col, ldc, a, a_off, lda, b, b_off + col, ldb, kdim)
        else:
            _gemm_set(nv, c, c_off + col, ldc, a, a_off, lda, b, b_off + col, ldb, kdim)
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
