"""The chapters' own "On the real GPU" measurements (flashsim.course.kit.real_gpu.by_launch, kernel_memory,
measured_on): per launch and tensor in the interpreter, per launch under Nsight Compute on a GPU (its counters do
not split by tensor), recorded runs without torch, provenance from metadata.

On a GPU the requested bytes are exact on both backends; where ncu is missing there (backend "timing"), the
measured columns are empty and the tests that need them skip, saying so."""
import pytest

from flashsim.course.kit import real_gpu
from flashsim.course.kit.results import recorded_names

INTERPRETER = real_gpu._interpreter() if real_gpu.missing("kernels") is None else True


def _measured(b):
    if b.backend not in ("interpreter", "ncu"):
        pytest.skip(f"no counters on this GPU (backend {b.backend}): {b.notice}")
    assert b.backend == ("interpreter" if INTERPRETER else "ncu")
    return b


def test_naive_round_trips_of_s_and_p_counted_per_launch():
    b = _measured(real_gpu.by_launch("naive", n=64, d=16, block_m=32, block_n=32, quiet=True))
    assert b.exact and b.launches() == ["_scores_kernel", "_softmax_kernel", "_pv_kernel"]
    n = 64
    # S: written by the scores launch, read back by the softmax launch; P: written by softmax, read by P·V (fp32)
    if b.per_tensor:
        assert b.measured("_scores_kernel", "S", "stores") == b.measured("_softmax_kernel", "S", "loads") == n * n * 4
        assert b.measured("_softmax_kernel", "P", "stores") == b.measured("_pv_kernel", "P", "loads") == n * n * 4
        assert "consistency check" in b.notice and "not a hardware measurement" in b.notice
    else:                         # ncu: each launch's total; S and P are the softmax launch's whole traffic
        assert b.measured("_scores_kernel", "S", "stores") is None          # not split by tensor: no number
        s_bytes = b.simulated("_scores_kernel", "S", "stores")
        assert b.measured("_scores_kernel", "all", "stores") == n * n * 4 == s_bytes
        assert b.measured("_softmax_kernel", "all", "loads") == n * n * 4                   # S in, P out
        assert b.measured("_softmax_kernel", "all", "stores") == n * n * 4
        assert "per launch, not per tensor" in b.notice and "Nsight Compute" in b.notice
    trips = b.round_trips()
    assert [r[:2] + r[3:4] for r in trips.rows] == [["S", "_scores_kernel", "_softmax_kernel"],
                                                    ["P", "_softmax_kernel", "_pv_kernel"]]
    assert all(r[2] == r[4] == n * n * 4 for r in trips.rows)


def test_flash_forward_tile_loop_reads_kv_once_per_row_block():
    n, d, bm = 128, 16, 32
    b = _measured(real_gpu.by_launch("flash_fwd", n=n, d=d, block_m=bm, block_n=16, quiet=True))
    assert b.exact
    q, kv = n * d * 2, (n // bm) * n * d * 2                                      # Q once; K and V once per row block
    if b.per_tensor:
        assert b.measured("_flash_fwd_kernel", "Q") == q and b.measured("_flash_fwd_kernel", "K") == kv
    assert b.simulated("_flash_fwd_kernel", "Q") == q and b.simulated("_flash_fwd_kernel", "K") == kv
    assert b.measured("_flash_fwd_kernel", "all") == q + 2 * kv                   # the launch's total, both backends


def test_backward_has_three_launches():
    b = _measured(real_gpu.by_launch("flash_bwd", n=64, d=16, block_m=32, block_n=32, quiet=True))
    if b.per_tensor:
        assert [r[0] for r in b.rows if r[1] == "DQ"] == ["_bwd_dq"]
    assert [launch for launch in b.view if "DQ" in b.view[launch]["stores"]] == ["_bwd_dq"]
    assert b.launches() == ["_bwd_preprocess", "_bwd_dkdv", "_bwd_dq"]
    assert b.exact and "_bwd_dkdv" in str(b.table())
    assert {(r[0], r[1]) for r in b.round_trips().rows} == {("DELTA", "_bwd_preprocess")}


def test_kernel_memory_is_quadratic_for_naive_linear_for_flash():
    m = real_gpu.kernel_memory(ns=(64, 128), d=16, quiet=True)
    (a, b), (fa, fb) = m["naive"], m["flash"]
    assert b / a > 3.5                           # S, P: N²
    assert m["naive"] == m["naive_model"] and m["flash"] == m["flash_model"]
    if INTERPRETER:
        assert fb / fa == 2                      # O and L: N
        assert fa == 64 * 16 * 2 + 64 * 4       # O (fp16) and the fp32 logsumexp
    else:                                        # the allocator's 512-byte blocks: L (256 B at N=64) takes one
        assert fa == 64 * 16 * 2 + 512 and fb == 128 * 16 * 2 + 512


def test_the_allocator_model_rounds_each_tensor_to_whole_blocks():
    assert real_gpu._allocated(256, real_gpu.ALLOCATOR_BLOCK_BYTES) == 512
    assert real_gpu._allocated(2048, real_gpu.ALLOCATOR_BLOCK_BYTES) == 2048
    assert real_gpu._allocated(257, 1) == 257


def test_ncu_launches_are_matched_by_name_or_by_position():
    names = ["_bwd_preprocess", "_bwd_dkdv", "_bwd_dq"]
    exact = [{"kernel": n, "global_load_bytes": i} for i, n in enumerate(names)]
    assert real_gpu._match_launches(names, exact) == dict(zip(names, exact))
    decorated = [{"kernel": "_flash_fwd_kernel"}] + [{"kernel": n + "_0d1d2"} for n in names]
    assert [L["kernel"] for L in real_gpu._match_launches(names, decorated).values()] == [n + "_0d1d2" for n in names]
    other = [{"kernel": "_flash_fwd_kernel"}] + [{"kernel": f"k{i}"} for i in range(3)]
    assert [L["kernel"] for L in real_gpu._match_launches(names, other).values()] == ["k0", "k1", "k2"]


def test_per_launch_rows_answer_for_the_launch_and_say_none_for_one_tensor():
    view = {"_k": {"loads": {"Q": 10, "K": 20}, "stores": {"O": 5}}}
    b = real_gpu.LaunchBreakdown("flash_fwd", {}, "ncu", [["_k", "all", 30, 30, 5, 5]], "", view)
    assert not b.per_tensor and b.exact and b.launches() == ["_k"]
    assert b.measured("_k", "all") == 30 and b.measured("_k", "Q") is None and b.simulated("_k", "Q") == 10
    assert b.measured("_k", "O", "stores") is None and b.simulated("_k", "O", "stores") == 5


def test_without_kernels_the_recorded_runs_are_shown(monkeypatch):
    monkeypatch.setattr(real_gpu, "missing", lambda extra: "torch and triton are not installed: pip install ...")
    b = real_gpu.by_launch("naive", quiet=True)
    assert b.backend.startswith("ncu on NVIDIA H100") and [r[0] for r in b.rows][:1] == ["_scores_kernel"]
    assert all(r[2] is not None for r in b.rows)
    assert [r[0] for r in b.round_trips().rows] == ["S", "P"]
    m = real_gpu.kernel_memory(quiet=True)
    assert "measured on an NVIDIA H200, 20" in m["backend"] and m["naive"][-1] > 100 * m["flash"][-1]


@pytest.mark.parametrize("name", recorded_names())
def test_every_recorded_result_says_where_and_when(name):
    line = real_gpu.measured_on(name)
    assert line.startswith("measured on ") and "a GPU" not in line and line[-10:-6] == "2026"


def test_by_launch_on_a_gpu_with_ncu_faked(monkeypatch):
    """The GPU branch, on any machine: ncu's launches (as flashsim.measure.ncu_profile returns them, the backward's
    forward pass first) become one row per launch, exact against the view, with a notice that says so."""
    from flashsim import measure
    from flashsim.model.kernel_io import kernel_io

    def ncu_profile(kernel, n, d, bm, bn, causal, dtype):
        view = kernel_io(kernel, n, d, bm, bn, causal, dtype)
        launches = [{"kernel": L.name, "global_load_bytes": float(L.l1_load_bytes),
                     "global_store_bytes": float(L.l1_store_bytes)} for L in view.launches]
        return {"backend": "ncu", "launches": [{"kernel": "_flash_fwd_kernel", "global_load_bytes": 1.0,
                                                "global_store_bytes": 1.0}] + launches}
    monkeypatch.setattr(real_gpu, "_interpreter", lambda: False)
    monkeypatch.setattr(measure, "ncu_profile", ncu_profile)
    b = real_gpu.by_launch("flash_bwd", n=64, d=16, block_m=32, block_n=32, quiet=True)
    assert b.backend == "ncu" and b.exact and not b.per_tensor
    assert b.launches() == ["_bwd_preprocess", "_bwd_dkdv", "_bwd_dq"]
    assert b.measured("_bwd_dq", "all") == b.simulated("_bwd_dq", "all") > 0 and b.measured("_bwd_dq", "Q") is None
    assert "per launch, not per tensor" in b.notice and "run to run" in b.notice
    assert {(r[0], r[1]) for r in b.round_trips().rows} == {("DELTA", "_bwd_preprocess")}
    assert "kernel view" in b.round_trips().caption
