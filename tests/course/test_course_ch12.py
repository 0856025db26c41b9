"""Chapter 12: the learner-kernel comparison, the dashboard, and the committed H200 results the chapter shows.

The final exercise's checker is tested on the catalogue of wrong kernels (tests/course/wrong_answers/ch12.py,
tests/course/test_checkers_catalogue.py).
"""
import flashsim.kernels  # noqa: F401,I001  (before triton: decides TRITON_INTERPRET)

import pytest
import triton
import triton.language as tl

from flashsim.course.ch12.checks import learner_kernel_comparison
from flashsim.solutions.ch12 import flash_inner


@triton.jit
def inner_stub(q, m_i, l_i, acc, k_base, v_base, stride_n, start_n, offs_m, offs_n, offs_d, N, D, qk_scale,
               CAUSAL: tl.constexpr):
    return m_i, l_i, acc                         # what the notebook's stub returns before the learner fills it in


def test_learner_comparison_matches_kernel_view():
    r = learner_kernel_comparison(flash_inner, n=96, d=16, quiet=True)
    assert r.simulated_load_bytes > 0
    if flashsim.kernels.INTERPRETER:
        assert r.exact
    assert r.plot() is not None
    assert "measured" in str(r.table())


def test_dashboard_without_a_kernel_frontend():
    from flashsim.course.ch12.dashboards import KernelBlockDashboard, learner_or_course_kernel, template_source
    from flashsim.errors import FlashsimError
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
    with pytest.raises(FlashsimError, match="BLOCK_N"):
        dash.update(block_n=48)
    assert "_flash_template_kernel" in template_source()
    assert learner_or_course_kernel(inner_stub, False) is None         # the course's kernel, not the answer key
    assert learner_or_course_kernel(inner_stub, True) is inner_stub
    course = KernelBlockDashboard(None, n=64, d=16)                     # the course's own flash_forward
    course.update(block_m=64, causal=True)
    assert course.current["simulated"] == dash.current["simulated"] and "course kernel" in course.readout()
    if flashsim.kernels.INTERPRETER:
        assert course.current["measured"] == dash.current["measured"]


def test_speed_plot_without_gpu():
    from flashsim.course.ch12.figures import plot_speed_vs_sdpa
    assert plot_speed_vs_sdpa(None) is not None
    fake = {"learner_ms": 1.0, "flashsim_ms": 0.9, "sdpa_ms": 0.7, "tflops": {"learner": 1, "flashsim": 1, "sdpa": 2},
            "size": {"n": 8, "d": 8, "batch": 1, "heads": 1, "causal": False, "dtype": "fp16"}}
    assert plot_speed_vs_sdpa(fake) is not None
    course_only = {**fake, "learner_ms": None, "tflops": {"flashsim": 1, "sdpa": 2},     # no passing kernel yet
                   "sdpa_backend": "cuDNN (SDPBackend.CUDNN_ATTENTION)"}
    fig = plot_speed_vs_sdpa(course_only)
    assert len(fig.axes[0].patches) == 2 and "cuDNN" in fig.axes[0].get_xticklabels()[1].get_text()
