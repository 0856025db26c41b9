"""The roofline model (chapters 01, 09)."""
import pytest

from flashsim.model.simulator import traffic
from flashsim.model.hardware import PRESETS, get_device
from flashsim.model.roofline import peak_flops, roofline


def test_roofline_arithmetic():
    hw = get_device("a100")
    r = roofline(flops=312e12, hbm_bytes=1.555e12, hardware=hw)  # 1 s of each
    assert r.time_s == pytest.approx(1.0) and r.memory_time_s == pytest.approx(1.0)
    assert r.arithmetic_intensity == pytest.approx(312e12 / 1.555e12)
    assert r.ridge_point_flops_per_byte == pytest.approx(hw.ridge_point_flops_per_byte)
    assert r.bound == "compute"  # at the ridge point exactly: compute
    assert roofline(1e12, 1e12, "a100").bound == "memory"
    assert roofline(1e15, 1e9, "a100").bound == "compute"
    assert roofline(10, 0, "a100").arithmetic_intensity == float("inf")


def test_fp32_uses_the_fp32_peak():
    hw = get_device("h100")
    assert peak_flops(hw, "fp32") == hw.peak_fp32_flops
    assert peak_flops(hw, "bf16") == peak_flops(hw, "fp16") == hw.peak_matmul_flops
    assert roofline(1e12, 1, hw, "fp32").compute_time_s == pytest.approx(1e12 / hw.peak_fp32_flops)


@pytest.mark.parametrize("device", sorted(PRESETS) + ["cpu"])
def test_standard_attention_memory_bound_flash_compute_bound_per_preset(device):
    """Chapter 09's point on every preset: naive attention is memory-bound; flash2 at d=128 with large blocks
    has far higher intensity (K, V re-read N/Br times: Br ≫ d is what makes it pay)."""
    naive = traffic("naive", 4096, 128, device=device)
    flash = traffic("flash2", 4096, 128, device=device, block_r=512, block_c=32, sram_bytes=1 << 21)
    # GPUs: ridge points of 100-200 FLOP/B put naive attention (≈ 60 FLOP/B at d = 128) under the roof; the CPU
    # preset's ridge point is ≈ 5 FLOP/B, so on a CPU even naive attention is compute-bound (chapter 10)
    assert naive.bound == ("compute" if device == "cpu" else "memory")
    assert flash.arithmetic_intensity > 3 * naive.arithmetic_intensity
    assert flash.time_s <= naive.time_s  # equal when both are compute-bound (the CPU)
    assert naive.time_s == max(naive.memory_time_s, naive.compute_time_s)


def test_flash2_compute_bound_on_h200_at_large_blocks():
    t = traffic("flash2", 16384, 128, block_r=256, block_c=64, sram_bytes=1 << 20, device="h200")
    assert t.arithmetic_intensity > t.ridge_point_flops_per_byte and t.bound == "compute"


def test_time_uses_dram_bytes_with_l2():
    t = traffic("flash2", 2048, 64, heads=4, l2=True)
    hw = get_device("h200")
    assert t.memory_time_s == pytest.approx(t.dram_bytes / hw.hbm_bandwidth_bytes_per_s)
    assert t.arithmetic_intensity == pytest.approx(t.flops / t.dram_bytes)
