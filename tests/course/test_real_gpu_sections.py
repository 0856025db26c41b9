"""The chapters' own "On the real GPU" measurements (flashsim.course.kit.real_gpu.by_launch, kernel_memory,
measured_on): per launch and tensor in the interpreter, recorded runs without torch, provenance from metadata."""
import pytest

from flashsim.course.kit import real_gpu
from flashsim.course.kit.results import recorded_names


def test_naive_round_trips_of_s_and_p_counted_per_launch():
    b = real_gpu.by_launch("naive", n=64, d=16, block_m=32, block_n=32, quiet=True)
    assert b.backend == "interpreter" and b.exact
    n = 64
    # S: written by the scores launch, read back by the softmax launch; P: written by softmax, read by P·V (fp32)
    assert b.measured("_scores_kernel", "S", "stores") == b.measured("_softmax_kernel", "S", "loads") == n * n * 4
    assert b.measured("_softmax_kernel", "P", "stores") == b.measured("_pv_kernel", "P", "loads") == n * n * 4
    assert "consistency check" in b.notice and "not a hardware measurement" in b.notice
    trips = b.round_trips()
    assert [r[:2] + r[3:4] for r in trips.rows] == [["S", "_scores_kernel", "_softmax_kernel"],
                                                    ["P", "_softmax_kernel", "_pv_kernel"]]
    assert all(r[2] == r[4] == n * n * 4 for r in trips.rows)


def test_flash_forward_tile_loop_reads_kv_once_per_row_block():
    n, d, bm = 128, 16, 32
    b = real_gpu.by_launch("flash_fwd", n=n, d=d, block_m=bm, block_n=16, quiet=True)
    assert b.exact
    assert b.measured("_flash_fwd_kernel", "Q") == n * d * 2                     # Q once
    assert b.measured("_flash_fwd_kernel", "K") == (n // bm) * n * d * 2         # K once per row block


def test_backward_has_three_launches():
    b = real_gpu.by_launch("flash_bwd", n=64, d=16, block_m=32, block_n=32, quiet=True)
    assert [r[0] for r in b.rows if r[1] == "DQ"] == ["_bwd_dq"]
    assert list(dict.fromkeys(r[0] for r in b.rows)) == ["_bwd_preprocess", "_bwd_dkdv", "_bwd_dq"]
    assert b.exact and "_bwd_dkdv" in str(b.table())
    assert {(r[0], r[1]) for r in b.round_trips().rows} == {("DELTA", "_bwd_preprocess")}


def test_kernel_memory_is_quadratic_for_naive_linear_for_flash():
    m = real_gpu.kernel_memory(ns=(64, 128), d=16, quiet=True)
    (a, b), (fa, fb) = m["naive"], m["flash"]
    assert b / a > 3.5 and fb / fa == 2          # S, P: N²; O and L: N
    assert fa == 64 * 16 * 2 + 64 * 4            # O (fp16) and the fp32 logsumexp


def test_without_kernels_the_recorded_runs_are_shown(monkeypatch):
    monkeypatch.setattr(real_gpu, "missing", lambda extra: "torch and triton are not installed: pip install ...")
    b = real_gpu.by_launch("naive", quiet=True)
    assert b.backend.startswith("ncu on NVIDIA H200") and [r[0] for r in b.rows][:1] == ["_scores_kernel"]
    assert all(r[2] is not None for r in b.rows)
    assert [r[0] for r in b.round_trips().rows] == ["S", "P"]
    m = real_gpu.kernel_memory(quiet=True)
    assert "measured on an NVIDIA H200, 20" in m["backend"] and m["naive"][-1] > 100 * m["flash"][-1]


@pytest.mark.parametrize("name", recorded_names())
def test_every_recorded_result_says_where_and_when(name):
    line = real_gpu.measured_on(name)
    assert line.startswith("measured on ") and "a GPU" not in line and line[-10:-6] == "2026"
