"""Chapter 10: the CPU view — dashboards without a Jupyter kernel, plots, checkers on solutions and wrong answers."""
import numpy as np

from flashsim import plots, widgets
from flashsim.cpu import naive_attention_numpy
from flashsim.course.ch10.checks import check_blocked_attention_numpy, check_step_working_set
from flashsim.solutions import ch10 as sol


def test_hierarchy_and_plot():
    h = widgets.cpu_hierarchy()
    assert h["preset"].sram_bytes > 0 and h["cores"] >= 1
    assert plots.plot_hierarchy_cpu_gpu(h) is not None


def test_time_and_memory_measured():
    m = widgets.cpu_time_memory(ns=(256, 1024), d=32, repeat=1)
    assert m["naive_peak"][1] >= 1024 * 1024 * 4            # the N x N score matrix
    assert m["flash_peak"][1] < m["naive_peak"][1] / 2
    assert max(m["flash_err"]) < 1e-5
    assert plots.plot_cpu_time_memory(m) is not None


def test_cache_block_dashboard():
    dash = widgets.CacheBlockDashboard(n=256, d=32, block_r=64, block_c=128)
    assert dash.current["working_set"] == sol.step_working_set_bytes(64, 128, 32)
    dash.update(block_c=1024, block_r=256)
    assert dash.current["block_r"] == 256 and dash.current["level"] in ("L1d", "L2", "L3", "DRAM")
    assert dash.current["time_s"] > 0
    assert "blocks" in dash.readout()
    sweep = dash.sweep(block_cs=(64, 128), block_r=64)
    assert len(sweep["time_s"]) == 2
    assert dash.figure(sweep) is not None


def test_working_set_checker():
    assert check_step_working_set(sol.step_working_set_bytes)
    assert not check_step_working_set(lambda br, bc, d: 4 * (2 * br * d + 2 * bc * d))     # S tile forgotten
    assert not check_step_working_set(lambda br, bc, d: 2 * (2 * br * d + 2 * bc * d + br * bc))  # fp16, not fp32


def test_blocked_attention_checker():
    assert check_blocked_attention_numpy(sol.blocked_attention_numpy, n=512)
    assert not check_blocked_attention_numpy(lambda q, k, v, b: naive_attention_numpy(q, k, v), n=512)   # N x N

    def missing_rescale(q, k, v, block):
        n, d = q.shape
        out = np.empty((n, d), np.float32)
        for i in range(0, n, block):
            qi = q[i:i + block] / np.float32(np.sqrt(d))
            m = np.full(len(qi), -np.inf, np.float32)
            l = np.zeros(len(qi), np.float32)
            acc = np.zeros((len(qi), d), np.float32)
            for j in range(0, n, block):
                s = qi @ k[j:j + block].T
                m_new = np.maximum(m, s.max(1))
                p = np.exp(s - m_new[:, None])
                l, acc, m = l + p.sum(1), acc + p @ v[j:j + block], m_new
            out[i:i + block] = acc / l[:, None]
        return out
    v = check_blocked_attention_numpy(missing_rescale, n=512)
    assert not v and "rescale" in v.message
