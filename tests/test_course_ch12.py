"""Chapter 12: the final exercise's checker accepts the solution and rejects plausible wrong kernels.

The wrong loop bodies below are what learners plausibly write: the rescale forgotten (the bookkeeping bug of
chapter 11), the causal mask forgotten, and a correct body that loads each K tile twice (right output, wrong IO).
"""
import flashsim.kernels  # noqa: F401,I001  (before triton: decides TRITON_INTERPRET)
import pytest
import triton
import triton.language as tl

from flashsim.exercises.ch12 import check_flash_kernel, learner_kernel_comparison
from flashsim.solutions.ch12 import flash_inner


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
    l_i = l_i + tl.sum(p, 1)                     # BUG: the old l_i and acc are not rescaled by exp2(m_i - m_new)
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
def inner_stub(q, m_i, l_i, acc, k_base, v_base, stride_n, start_n, offs_m, offs_n, offs_d, N, D, qk_scale,
               CAUSAL: tl.constexpr):
    return m_i, l_i, acc                         # what the notebook's stub returns before the learner fills it in


def test_checker_accepts_solution():
    v = check_flash_kernel(flash_inner)
    assert v, v.message
    if flashsim.kernels.INTERPRETER:
        assert v.details["io_exact"] is True


@pytest.mark.parametrize("wrong, why", [(inner_missing_rescale, "rescale"), (inner_no_causal_mask, "causal"),
                                        (inner_stub, "NaN")])
def test_checker_rejects_wrong_output(wrong, why):
    v = check_flash_kernel(wrong, check_speed=False)
    assert not v
    assert why in v.message


@pytest.mark.skipif(not flashsim.kernels.INTERPRETER, reason="IO is measured with the Triton interpreter")
def test_checker_rejects_extra_io():
    v = check_flash_kernel(inner_loads_k_twice, check_speed=False)
    assert not v
    assert v.details["io_exact"] is False
    assert "bytes more" in v.message


def test_checker_rejects_undecorated_function():
    def plain(*args):
        return args[1], args[2], args[3]
    v = check_flash_kernel(plain)
    assert not v and "@triton.jit" in v.message


def test_learner_comparison_matches_kernel_view():
    r = learner_kernel_comparison(flash_inner, n=96, d=16, quiet=True)
    assert r.simulated_load_bytes > 0
    if flashsim.kernels.INTERPRETER:
        assert r.exact
    assert r.plot() is not None
    assert "measured" in str(r.table())


@pytest.mark.gpu
@pytest.mark.skipif(flashsim.kernels.INTERPRETER, reason="needs a CUDA GPU")
def test_speed_against_sdpa():
    v = check_flash_kernel(flash_inner, check_speed=True)
    assert v, v.message
    speed = v.details["speed"]
    print(speed)
    assert speed["slowdown_vs_sdpa"] < 4.0


def test_kv_bytes_checker():
    from flashsim.exercises.ch12 import check_kernel_kv_bytes
    from flashsim.solutions.ch12 import kernel_kv_bytes
    assert check_kernel_kv_bytes(kernel_kv_bytes)
    # off-by-one block: floor instead of ceil for the number of row blocks
    assert not check_kernel_kv_bytes(lambda n, d, bm, bn, causal, es: 2 * (n // bm) * n * d * es)
    # causal ignored
    assert not check_kernel_kv_bytes(lambda n, d, bm, bn, causal, es: 2 * -(-n // bm) * n * d * es)


def test_dashboard_without_a_kernel_frontend():
    from flashsim.widgets.ch12 import KernelBlockDashboard, learner_or_solution, template_source
    dash = KernelBlockDashboard(flash_inner, n=64, d=16)
    before = dict(dash.current)
    dash.update(block_m=64, causal=True)
    assert dash.current["block_m"] == 64 and dash.current["causal"]
    if flashsim.kernels.INTERPRETER:
        assert dash.current["exact"] and before["exact"]
        kv = dash.current["simulated"]["loads"]["K"]
        assert kv < before["simulated"]["loads"]["K"]
    assert "BLOCK_M=64" in dash.readout()
    assert dash.figure() is not None
    with pytest.raises(ValueError):
        dash.update(block_n=48)
    assert "_flash_template_kernel" in template_source()
    assert learner_or_solution(inner_stub, False) is flash_inner
    assert learner_or_solution(inner_stub, True) is inner_stub


def test_speed_plot_without_gpu():
    from flashsim.plots.ch12 import plot_speed_vs_sdpa
    assert plot_speed_vs_sdpa(None) is not None
    fake = {"learner_ms": 1.0, "flashsim_ms": 0.9, "sdpa_ms": 0.7, "tflops": {"learner": 1, "flashsim": 1, "sdpa": 2},
            "size": {"n": 8, "d": 8, "batch": 1, "heads": 1, "causal": False, "dtype": "fp16"}}
    assert plot_speed_vs_sdpa(fake) is not None
