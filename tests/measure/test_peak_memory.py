"""flashsim.measure.peak_memory: peak memory of one call, via tracemalloc, RSS, or torch's CUDA allocator (chapter 06)."""
import numpy as np
import pytest

from flashsim.cpu import flash_attention_cpu, naive_attention_numpy
from flashsim.errors import FlashsimError
from flashsim.measure.peak_memory import peak_memory_cpu, peak_memory_gpu, rss_peak_supported

MiB = 1024 * 1024


def make_and_drop(n_bytes):
    a = np.ones(n_bytes // 8)  # float64, touched
    b = a + 1  # a second array alive at the same time
    del a
    return float(b[0])


def test_tracemalloc_sees_numpy_arrays():
    peak = peak_memory_cpu(make_and_drop, 8 * MiB)
    assert 16 * MiB <= peak < 17 * MiB


def test_inputs_held_before_are_not_counted():
    big = np.ones(4 * MiB)
    assert peak_memory_cpu(lambda x: float(x[0]), big) < 64 * 1024


@pytest.mark.skipif(not rss_peak_supported(), reason="needs Linux /proc/self/clear_refs")
def test_rss_method_sees_any_allocator():
    torch = pytest.importorskip("torch")
    peak = peak_memory_cpu(lambda n: torch.ones(n).sum().item(), 16 * MiB, method="rss")  # 64 MiB, torch allocator
    assert peak_memory_cpu(lambda t: (t * 2).sum().item(), torch.ones(16 * MiB)) >= 56 * MiB  # auto: rss
    assert 56 * MiB <= peak < 96 * MiB
    # buffers over 32 MiB always come fresh from the OS (glibc's largest mmap threshold), so RSS must grow
    assert peak_memory_cpu(make_and_drop, 64 * MiB, method="rss") >= 96 * MiB


def test_flash_vs_naive_peak():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2048, 64), dtype=np.float32) for _ in range(3))
    flash_attention_cpu(q[:64], k[:64], v[:64], block_r=64, block_c=64)
    naive = peak_memory_cpu(naive_attention_numpy, q, k, v)
    flash = peak_memory_cpu(flash_attention_cpu, q, k, v, block_r=64, block_c=64)
    assert naive >= 4 * 2048 * 2048  # S alone
    assert flash < naive / 4


def test_bad_arguments():
    with pytest.raises(FlashsimError, match="not callable"):
        peak_memory_cpu(3)
    with pytest.raises(FlashsimError, match="method"):
        peak_memory_cpu(np.ones, 3, method="valgrind")


def test_gpu_without_cuda_says_so():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        x = torch.ones(1024, 1024, device="cuda")
        assert peak_memory_gpu(lambda t: t @ t, x) >= 4 * MiB
    else:
        with pytest.raises(FlashsimError, match="CUDA"):
            peak_memory_gpu(lambda: None)
