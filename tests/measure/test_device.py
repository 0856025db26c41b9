"""Predictions follow the GPU they run on: the preset comes from the device's name and properties (faked here)."""
from types import SimpleNamespace

import pytest

from flashsim.measure import device
from flashsim.model.hardware import PRESETS, preset_from_properties

MiB, KiB = 1024 * 1024, 1024


def props(name, sms, l2, smem, major=7, minor=5, **kw):
    return SimpleNamespace(name=name, multi_processor_count=sms, L2_cache_size=l2,
                           shared_memory_per_block_optin=smem, major=major, minor=minor, **kw)


@pytest.fixture
def fake_gpu(monkeypatch):
    torch = pytest.importorskip("torch")
    device.device_hardware.cache_clear()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)

    def install(p):
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index=0: p)
    yield install
    device.device_hardware.cache_clear()


def test_known_names_get_their_presets(fake_gpu, capsys):
    fake_gpu(props("Tesla T4", 40, 4 * MiB, 64 * KiB))
    assert device.device_hardware() is PRESETS["t4"]
    device.device_hardware.cache_clear()
    fake_gpu(props("NVIDIA H200", 132, 60 * MiB, 227 * KiB, major=9, minor=0))
    assert device.device_hardware() is PRESETS["h200"]
    assert capsys.readouterr().out == ""                                  # no notice for a known GPU
    for name, key in (("NVIDIA A100-SXM4-80GB", "a100"), ("NVIDIA H100 80GB HBM3", "h100"),
                      ("NVIDIA GeForce RTX 4090", "rtx4090")):
        assert preset_from_properties(name, 1, 1, 1) is PRESETS[key]


def test_unknown_gpu_gets_a_preset_built_from_its_properties_and_one_notice(fake_gpu, capsys):
    fake_gpu(props("NVIDIA L4", 58, 48 * MiB, 99 * KiB, major=8, minor=9, memory_clock_rate=6_251_000,
                   memory_bus_width=192))
    hw = device.device_hardware()
    assert (hw.name, hw.num_sms, hw.l2_bytes, hw.sram_bytes) == ("NVIDIA L4", 58, 48 * MiB, 99 * KiB)
    assert hw.hbm_bandwidth_bytes_per_s == pytest.approx(300.048e9)      # 2 x 6.251 GHz x 24 bytes
    assert hw.peak_matmul_flops == PRESETS["a100"].peak_matmul_flops    # borrowed from its generation
    device.device_hardware()                                              # cached: the notice is printed once
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and "NVIDIA L4" in lines[0] and "built from the device's properties" in lines[0]


def test_measure_simulates_the_gpu_it_runs_on(fake_gpu, monkeypatch):
    from flashsim.measure import cli
    from flashsim.model.kernel_io import kernel_dram
    fake_gpu(props("Tesla T4", 40, 4 * MiB, 64 * KiB))
    monkeypatch.setattr(cli, "interpreting", lambda: False)
    monkeypatch.setattr(cli, "ncu_profile", lambda *a, **kw: {"backend": "timing", "duration_ms": 1.0,
                                                               "implied_bandwidth_bytes_per_s": 1.0,
                                                               "hardware": kw["hardware"]})
    res = cli.measure_cli_result("flash_fwd", 4096, 64, 64, 64, heads=16)
    t4 = kernel_dram("flash_fwd", 4096, 64, 64, 64, heads=16, hardware="t4")["total"].dram_bytes
    h200 = kernel_dram("flash_fwd", 4096, 64, 64, 64, heads=16, hardware="h200")["total"].dram_bytes
    assert res["hardware"] == "Tesla T4" and res["simulated_dram_bytes"] == t4 != h200


def test_no_gpu_is_a_clear_error(monkeypatch):
    torch = pytest.importorskip("torch")
    device.device_hardware.cache_clear()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(Exception, match="hardware='h200'"):
        device.device_hardware()
    device.device_hardware.cache_clear()
