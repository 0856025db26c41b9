"""Wrong answers learners write for chapter 12 (the final kernel, in Triton), each with its diagnosis.

Every loop body below is the solution with one bug a learner really writes. They run in the Triton interpreter
on a CPU (TRITON_INTERPRET=1) and compiled on a GPU.
"""
from flashsim.kernels.runtime import select_backend

select_backend()

import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def inner_stub(q, m_i, l_i, acc, k_base, v_base, stride_n, start_n, offs_m, offs_n, offs_d, N, D, qk_scale,
               CAUSAL: tl.constexpr):
    return m_i, l_i, acc                         # the notebook's stub, untouched


@triton.jit
def inner_missing_rescale(q, m_i, l_i, acc, k_base, v_base, stride_n, start_n, offs_m, offs_n, offs_d, N, D,
                          qk_scale, CAUSAL: tl.constexpr):
    cols = start_n + offs_n
    n_valid = cols < N
    kv_mask = n_valid[:, None] & (offs_d[None, :] < D)
    k = tl.load(k_base + cols[:, None] * stride_n + offs_d[None, :], mask=kv_mask, other=0.0)
    s = tl.dot(q, tl.trans(k)) * qk_scale
    keep = n_valid[None, :]
    if CAUSAL:
        keep = keep & (offs_m[:, None] >= cols[None, :])
    s = tl.where(keep, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    p = tl.math.exp2(s - m_new[:, None])
    l_i = l_i + tl.sum(p, 1)                     # BUG: the old l_i and acc are not rescaled
    v = tl.load(v_base + cols[:, None] * stride_n + offs_d[None, :], mask=kv_mask, other=0.0)
    acc += tl.dot(p.to(v.dtype), v)
    return m_new, l_i, acc


@triton.jit
def inner_no_causal_mask(q, m_i, l_i, acc, k_base, v_base, stride_n, start_n, offs_m, offs_n, offs_d, N, D,
                         qk_scale, CAUSAL: tl.constexpr):
    cols = start_n + offs_n
    n_valid = cols < N
    kv_mask = n_valid[:, None] & (offs_d[None, :] < D)
    k = tl.load(k_base + cols[:, None] * stride_n + offs_d[None, :], mask=kv_mask, other=0.0)
    s = tl.dot(q, tl.trans(k)) * qk_scale
    s = tl.where(n_valid[None, :], s, float("-inf"))   # BUG: CAUSAL ignored
    m_new = tl.maximum(m_i, tl.max(s, 1))
    p = tl.math.exp2(s - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    v = tl.load(v_base + cols[:, None] * stride_n + offs_d[None, :], mask=kv_mask, other=0.0)
    acc += tl.dot(p.to(v.dtype), v)
    return m_new, l_i, acc


@triton.jit
def inner_loads_k_twice(q, m_i, l_i, acc, k_base, v_base, stride_n, start_n, offs_m, offs_n, offs_d, N, D,
                        qk_scale, CAUSAL: tl.constexpr):
    cols = start_n + offs_n
    n_valid = cols < N
    kv_mask = n_valid[:, None] & (offs_d[None, :] < D)
    k = tl.load(k_base + cols[:, None] * stride_n + offs_d[None, :], mask=kv_mask, other=0.0)
    s = tl.dot(q, tl.trans(k)) * qk_scale
    keep = n_valid[None, :]
    if CAUSAL:
        keep = keep & (offs_m[:, None] >= cols[None, :])
    s = tl.where(keep, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    k2 = tl.load(k_base + cols[:, None] * stride_n + offs_d[None, :], mask=kv_mask, other=0.0)  # BUG: again
    s = tl.where(keep, tl.dot(q, tl.trans(k2)) * qk_scale, float("-inf"))
    p = tl.math.exp2(s - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    v = tl.load(v_base + cols[:, None] * stride_n + offs_d[None, :], mask=kv_mask, other=0.0)
    acc += tl.dot(p.to(v.dtype), v)
    return m_new, l_i, acc


@triton.jit
def inner_typo(q, m_i, l_i, acc, k_base, v_base, stride_n, start_n, offs_m, offs_n, offs_d, N, D, qk_scale,
               CAUSAL: tl.constexpr):
    cols = start_n + offs_n
    n_valid = cols < N
    kv_mask = n_valid[:, None] & (offs_d[None, :] < D)
    k = tl.load(k_base + cols[:, None] * stride_n + offs_d[None, :], mask=kv_mask, other=0.0)
    s = tl.dot(q, tl.trans(k)) * qk_scal  # noqa: F821  BUG: a typo
    m_new = tl.maximum(m_i, tl.max(s, 1))
    return m_new, l_i, acc


@triton.jit
def inner_no_qk_scale(q, m_i, l_i, acc, k_base, v_base, stride_n, start_n, offs_m, offs_n, offs_d, N, D, qk_scale,
                      CAUSAL: tl.constexpr):
    cols = start_n + offs_n
    n_valid = cols < N
    kv_mask = n_valid[:, None] & (offs_d[None, :] < D)
    k = tl.load(k_base + cols[:, None] * stride_n + offs_d[None, :], mask=kv_mask, other=0.0)
    s = tl.dot(q, tl.trans(k))                   # BUG: qk_scale forgotten
    keep = n_valid[None, :]
    if CAUSAL:
        keep = keep & (offs_m[:, None] >= cols[None, :])
    s = tl.where(keep, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    p = tl.math.exp2(s - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    v = tl.load(v_base + cols[:, None] * stride_n + offs_d[None, :], mask=kv_mask, other=0.0)
    acc += tl.dot(p.to(v.dtype), v)
    return m_new, l_i, acc


@triton.jit
def inner_exp_not_exp2(q, m_i, l_i, acc, k_base, v_base, stride_n, start_n, offs_m, offs_n, offs_d, N, D,
                       qk_scale, CAUSAL: tl.constexpr):
    cols = start_n + offs_n
    n_valid = cols < N
    kv_mask = n_valid[:, None] & (offs_d[None, :] < D)
    k = tl.load(k_base + cols[:, None] * stride_n + offs_d[None, :], mask=kv_mask, other=0.0)
    s = tl.dot(q, tl.trans(k)) * qk_scale
    keep = n_valid[None, :]
    if CAUSAL:
        keep = keep & (offs_m[:, None] >= cols[None, :])
    s = tl.where(keep, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    p = tl.exp(s - m_new[:, None])               # BUG: e^x of scores in log2 units
    alpha = tl.exp(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    v = tl.load(v_base + cols[:, None] * stride_n + offs_d[None, :], mask=kv_mask, other=0.0)
    acc += tl.dot(p.to(v.dtype), v)
    return m_new, l_i, acc


@triton.jit
def inner_no_max(q, m_i, l_i, acc, k_base, v_base, stride_n, start_n, offs_m, offs_n, offs_d, N, D, qk_scale,
                 CAUSAL: tl.constexpr):
    cols = start_n + offs_n
    n_valid = cols < N
    kv_mask = n_valid[:, None] & (offs_d[None, :] < D)
    k = tl.load(k_base + cols[:, None] * stride_n + offs_d[None, :], mask=kv_mask, other=0.0)
    s = tl.dot(q, tl.trans(k)) * qk_scale
    keep = n_valid[None, :]
    if CAUSAL:
        keep = keep & (offs_m[:, None] >= cols[None, :])
    s = tl.where(keep, s, float("-inf"))
    p = tl.math.exp2(s)                          # BUG: no running max subtracted
    l_i = l_i + tl.sum(p, 1)
    v = tl.load(v_base + cols[:, None] * stride_n + offs_d[None, :], mask=kv_mask, other=0.0)
    acc += tl.dot(p.to(v.dtype), v)
    return tl.zeros_like(m_i), l_i, acc          # sums are relative to 0, so m = 0


@triton.jit
def inner_keys_past_n(q, m_i, l_i, acc, k_base, v_base, stride_n, start_n, offs_m, offs_n, offs_d, N, D, qk_scale,
                      CAUSAL: tl.constexpr):
    cols = start_n + offs_n
    n_valid = cols < N
    kv_mask = n_valid[:, None] & (offs_d[None, :] < D)
    k = tl.load(k_base + cols[:, None] * stride_n + offs_d[None, :], mask=kv_mask, other=0.0)
    s = tl.dot(q, tl.trans(k)) * qk_scale        # BUG: keys past N score 0, not -inf
    if CAUSAL:
        s = tl.where(offs_m[:, None] >= cols[None, :], s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    p = tl.math.exp2(s - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    v = tl.load(v_base + cols[:, None] * stride_n + offs_d[None, :], mask=kv_mask, other=0.0)
    acc += tl.dot(p.to(v.dtype), v)
    return m_new, l_i, acc


@triton.jit
def inner_diagonal_masked(q, m_i, l_i, acc, k_base, v_base, stride_n, start_n, offs_m, offs_n, offs_d, N, D,
                          qk_scale, CAUSAL: tl.constexpr):
    cols = start_n + offs_n
    n_valid = cols < N
    kv_mask = n_valid[:, None] & (offs_d[None, :] < D)
    k = tl.load(k_base + cols[:, None] * stride_n + offs_d[None, :], mask=kv_mask, other=0.0)
    s = tl.dot(q, tl.trans(k)) * qk_scale
    keep = n_valid[None, :]
    if CAUSAL:
        keep = keep & (offs_m[:, None] > cols[None, :])   # BUG: > hides the diagonal
    s = tl.where(keep, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    p = tl.math.exp2(s - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    v = tl.load(v_base + cols[:, None] * stride_n + offs_d[None, :], mask=kv_mask, other=0.0)
    acc += tl.dot(p.to(v.dtype), v)
    return m_new, l_i, acc


@triton.jit
def inner_l_replaced(q, m_i, l_i, acc, k_base, v_base, stride_n, start_n, offs_m, offs_n, offs_d, N, D, qk_scale,
                     CAUSAL: tl.constexpr):
    cols = start_n + offs_n
    n_valid = cols < N
    kv_mask = n_valid[:, None] & (offs_d[None, :] < D)
    k = tl.load(k_base + cols[:, None] * stride_n + offs_d[None, :], mask=kv_mask, other=0.0)
    s = tl.dot(q, tl.trans(k)) * qk_scale
    keep = n_valid[None, :]
    if CAUSAL:
        keep = keep & (offs_m[:, None] >= cols[None, :])
    s = tl.where(keep, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    p = tl.math.exp2(s - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)
    l_i = tl.sum(p, 1)                            # BUG: the sum is replaced, not accumulated
    acc = acc * alpha[:, None]
    v = tl.load(v_base + cols[:, None] * stride_n + offs_d[None, :], mask=kv_mask, other=0.0)
    acc += tl.dot(p.to(v.dtype), v)
    return m_new, l_i, acc


def _kv_rows(n, bm, bn, causal):
    """Rows of K one head's programs load (the right count, for the K-only wrong answer)."""
    return sum(min(bn, n - s) for i in range(-(-n // bm)) for s in range(0, min((i + 1) * bm, n) if causal else n, bn))


def not_decorated(*args):
    return args[1], args[2], args[3]


CATALOGUE = [
    ("12.1", inner_stub, "all_non_finite"),
    ("12.1", inner_missing_rescale, "missing_rescale"),
    ("12.1", inner_no_causal_mask, "causal_mask_missing"),
    ("12.1", inner_loads_k_twice, "extra_loads"),
    ("12.1", inner_typo, "learner_error"),
    ("12.1", inner_no_qk_scale, "wrong_sm_scale"),
    ("12.1", inner_exp_not_exp2, "exp_not_exp2"),
    ("12.1", inner_no_max, "overflow"),
    ("12.1", inner_keys_past_n, "keys_past_n_unmasked"),
    ("12.1", inner_diagonal_masked, "diagonal_masked"),
    ("12.1", inner_l_replaced, "missing_normalisation"),
    ("12.1", not_decorated, "not_jit"),
    ("12.2", lambda n, d, bm, bn, c, es: _kv_rows(n, bm, bn, c) * d * es, "k_only"),
    ("12.2", lambda n, d, bm, bn, c, es: 2 * -(-n // bm) * n * d * es, "causal_ignored"),
    ("12.2", lambda n, d, bm, bn, c, es: 2 * sum(-(-(min((i + 1) * bm, n) if c else n) // bn) * bn
                                                  for i in range(-(-n // bm))) * d * es, "mask_ignored"),
]



def _kv_square(n, d, bm, bn, c, es):
    """Issue 26 (Br ≠ Bc): causal program i visits i + 1 tiles, as if BLOCK_M = BLOCK_N."""
    rows = 0
    for i in range(-(-n // bm)):
        stop = min((i + 1) * bn, n) if c else n
        rows += sum(min(bn, n - s) for s in range(0, stop, bn))
    return 2 * rows * d * es


def _kv_first_row(n, d, bm, bn, c, es):
    rows = 0
    for i in range(-(-n // bm)):
        stop = min(i * bm + 1, n) if c else n
        rows += sum(min(bn, n - s) for s in range(0, stop, bn))
    return 2 * rows * d * es


CATALOGUE += [
    ("12.2", _kv_square, "square_blocks"),
    ("12.2", _kv_first_row, "causal_stops_at_first_row"),
]

#: the kernels a GPU grading run uses (benchmarks/grade_final_h200.py): the solution plus two catalogued wrong ones
GPU_WRONG = ("inner_loads_k_twice", "inner_missing_rescale")
