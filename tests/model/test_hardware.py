"""Hardware presets (chapter 01): every field present and positive, overrides, the CPU preset, bad names."""
import pytest

from flashsim.errors import FlashsimError
from flashsim.model.hardware import PRESETS, Hardware, cpu_preset, device_names, get_device

FIELDS = ("sram_bytes", "num_sms", "l2_bytes", "hbm_bandwidth_bytes_per_s", "peak_matmul_flops", "peak_fp32_flops")


@pytest.mark.parametrize("name", sorted(PRESETS) + ["cpu"])
def test_presets_complete(name):
    hw = get_device(name)
    assert isinstance(hw, Hardware) and hw.name and hw.source
    for f in FIELDS:
        assert getattr(hw, f) > 0, f
    assert hw.ridge_point_flops_per_byte == hw.peak_matmul_flops / hw.hbm_bandwidth_bytes_per_s


def test_required_presets_and_known_numbers():
    assert {"a100", "h100", "h200", "rtx4090", "t4"} <= set(PRESETS)
    a100 = get_device("a100")
    assert (a100.num_sms, a100.sram_bytes, a100.l2_bytes) == (108, 164 * 1024, 40 * 1024**2)
    assert a100.hbm_bandwidth_bytes_per_s == 1.555e12 and a100.peak_matmul_flops == 312e12
    assert get_device("h100").sram_bytes == get_device("h200").sram_bytes == 228 * 1024


def test_aliases_and_case():
    assert get_device("A100-40GB") == get_device("a100")
    assert get_device("4090") == get_device("rtx4090")
    assert get_device(get_device("t4")) == get_device("t4")


def test_override_any_field():
    hw = get_device("h200", sram_bytes=100 * 1024, l2_bytes=1 << 20)
    assert hw.sram_bytes == 100 * 1024 and hw.l2_bytes == 1 << 20
    assert get_device("h200", sram_bytes=None) == get_device("h200")  # None means "keep the preset's"
    assert PRESETS["h200"].sram_bytes == 228 * 1024  # presets are not mutated


def test_bad_override_and_name():
    with pytest.raises(FlashsimError, match="unknown device 'mi300': use one of"):
        get_device("mi300")
    with pytest.raises(FlashsimError, match="unknown hardware field"):
        get_device("a100", sram=5)
    with pytest.raises(FlashsimError, match="must be a positive number"):
        get_device("a100", sram_bytes=-1)


def test_cpu_preset_reads_this_machine():
    hw = cpu_preset()
    assert hw.num_sms >= 1 and hw.sram_bytes >= 64 * 1024 and hw.l2_bytes >= hw.sram_bytes
    assert "cpu" in device_names()
