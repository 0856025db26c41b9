"""flashsim.kernels on a CUDA GPU: correctness in fp16/bf16 and ncu IO (skipped without a GPU)."""
import shutil

import pytest
import torch

from flashsim.measure.correctness import attention_vs_torch

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (kernels compile for it)")]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("n,d,causal", [(128, 64, False), (1000, 80, True), (4096, 128, True)])
def test_attention_gpu_within_2x_torch_error(n, d, causal, dtype):
    import flashsim.kernels as K
    assert not K.INTERPRETER
    q, k, v, do = (torch.randn(1, 4, n, d, device="cuda").to(dtype) for _ in range(4))
    res = attention_vs_torch(q, k, v, do, causal)  # each output vs the one float64 reference, next to torch's
    assert res["pass"], res


def test_cpu_tensors_rejected_on_gpu():
    import flashsim.kernels as K
    from flashsim.errors import FlashsimError
    q = torch.randn(1, 1, 64, 64)
    with pytest.raises(FlashsimError, match="cuda"):
        K.flash_forward(q, q, q)


@pytest.mark.counters
@pytest.mark.skipif(shutil.which("ncu") is None, reason="needs Nsight Compute (ncu) on PATH")
def test_ncu_flash_fwd_requests_match_kernel_view():
    """The requested bytes are within 10 % of the kernel view's, the DRAM bytes within 10 % plus 1 MiB of the L2
    model's. The DRAM counters are device-wide: other test workers' kernels on the GPU add to them, hence the
    `counters` marker (benchmarks/results/NOTES.md has the measurement)."""
    from flashsim.measure import measure_cli_result
    res = measure_cli_result("flash_fwd", 1024, 64, 128, 64, False, "fp16", batch=1, heads=8)
    if res["backend"] != "ncu":
        pytest.skip("ncu could not read the counters here")
    assert abs(res["measured_load_bytes"] - res["simulated_load_bytes"]) <= 0.1 * res["simulated_load_bytes"]
    assert abs(res["measured_dram_bytes"] - res["simulated_dram_bytes"]) <= 0.1 * res["measured_dram_bytes"] + 2**20
