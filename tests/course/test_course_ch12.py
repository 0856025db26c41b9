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


@pytest.fixture
def no_kernels(monkeypatch):
    """As if torch and triton were not installed (a lab-only install): ``import torch`` raises ImportError."""
    import sys
    for name in ("torch", "triton"):
        monkeypatch.setitem(sys.modules, name, None)


def test_lab_only_the_cell_defines_its_kernel_and_the_checker_shows_the_recorded_grading(no_kernels, capsys):
    from flashsim.course.ch12.checks import check_flash_kernel, check_kernel_kv_bytes, triton_modules
    from flashsim.solutions.ch12 import kernel_kv_bytes
    triton_, tl_ = triton_modules()
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and 'pip install "flashsim[kernels]"' in out and "Triton kernel" in out

    @triton_.jit
    def my_inner(q, m_i, l_i, acc, k_base, v_base, stride_n, start_n, offs_m, offs_n, offs_d, N, D, qk_scale,
                 CAUSAL: tl_.constexpr):
        return m_i, l_i, acc

    assert my_inner.fn.__name__ == "my_inner" and "not compiled" in repr(my_inner)
    with pytest.raises(ImportError, match="flashsim"):
        my_inner()
    v = check_flash_kernel(my_inner)
    out = capsys.readouterr().out
    assert not v and v.diagnosis == "not_graded" and "my_inner was not graded here" in out
    assert out.splitlines()[0].startswith("torch and triton are not installed") and "NVIDIA H200" in out
    assert "benchmarks/results/grade_final_h200" in out and "missing_rescale" in out and "1.23×" in out
    assert [r[0] for r in v.table.rows] == ["solution", "inner_loads_k_twice", "inner_missing_rescale"]
    assert check_kernel_kv_bytes(kernel_kv_bytes, quiet=True)          # 12.2 needs the kernel view alone


def test_lab_only_the_dashboard_shows_the_kernel_view_and_the_comparison_the_recording(no_kernels, capsys):
    from flashsim.course.ch12.checks import recorded_grading
    from flashsim.course.ch12.dashboards import KernelBlockDashboard, learner_or_course_kernel
    assert learner_or_course_kernel(flash_inner, recorded_grading(quiet=True)) is None
    assert "kernel view" in capsys.readouterr().out
    dash = KernelBlockDashboard(None)
    dash.update(block_m=64, block_n=32, causal=True)
    assert not dash.runnable and dash.current["measured"] is None and dash.current["simulated"]["loads"]["K"] > 0
    assert "the kernel view alone" in dash.readout() and dash.figure() is not None
    r = learner_kernel_comparison(None)
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and 'pip install "flashsim[kernels]"' in out
    assert r.backend.startswith("ncu on ") and r.exact and r.plot() is not None


def test_the_template_source_reads_the_same_from_its_file(monkeypatch):
    from flashsim.course.ch12 import dashboards
    installed = dashboards.template_source()
    monkeypatch.setattr(dashboards, "missing", lambda extra: "torch and triton are not installed")
    assert dashboards.template_source() == installed and installed.startswith("@triton.jit\ndef _flash_template")


def test_gpu_io_grading_runs_the_learners_source_under_ncu(tmp_path, monkeypatch):
    """ncu_learner_io writes the learner's kernel into a script and reads one launch back through
    flashsim.measure.ncu.ncu_profile_script (a fake ncu here: it keeps the script and prints ncu's CSV)."""
    import os
    import stat
    import sys
    from flashsim.course.ch12 import checks
    head = '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n'
    rows = "".join(f'"0","_flash_template_kernel","{m}","byte","{v}"\n' for m, v in (
        ("l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum", "4,718,592"),
        ("l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum", "270,336")))
    fake = tmp_path / "ncu"
    fake.write_text(f"#!{sys.executable}\nimport shutil, sys\nshutil.copy(sys.argv[-1], {str(tmp_path / 'kept.py')!r})\n"
                    f"sys.stdout.write({head + rows!r})\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    got = checks.ncu_learner_io(flash_inner, 1024, 64, 2, True, 64, 64)
    assert (got["backend"], got["global_load_bytes"], got["global_store_bytes"]) == ("ncu", 4718592, 270336)
    kept = (tmp_path / "kept.py").read_text()
    assert "def flash_inner(" in kept and "flash_forward_template(q, k, v, flash_inner, causal=True" in kept
    ok, line, det = checks._grade_gpu_io(flash_inner, extra_loads=0)
    assert ok and "equal the kernel view exactly" in line and det["gpu_load_bytes"] == det["view_load_bytes"]
