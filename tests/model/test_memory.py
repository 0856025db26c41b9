"""The memory model (chapters 01-03): counted moves, SRAM capacity, count_once, masks, events, host budget."""
import numpy as np
import pytest

from flashsim.errors import FlashsimError, MemoryBudgetError, SramCapacityError
from flashsim.model.memory import (MASK_DTYPE, Counters, Memory, check_host_budget, check_tile_set_fits,
                             largest_fitting_block, storage_bytes)


def test_load_store_counts_bytes_per_tensor():
    mem = Memory(sram_capacity_bytes=1 << 16, dtype="fp16")
    mem.put("Q", np.ones((8, 4)))
    mem.empty("O", (8, 4))
    q = mem.load("Q", rows=slice(0, 4), tile=(0,))
    assert q.dtype == np.float32 and q.shape == (4, 4)
    mem.store("O", q * 2, rows=slice(0, 4), tile=(0,))
    c = mem.counters
    assert (c.hbm_read_bytes, c.hbm_write_bytes) == (32, 32)
    assert c.read_bytes_by_tensor["Q"] == 32 and c.write_bytes_by_tensor["O"] == 32
    assert np.isnan(mem.hbm("O")[4:]).all()  # unwritten rows show


def test_store_rounds_to_dtype():
    mem = Memory(1 << 16, dtype="bf16")
    mem.empty("X", (1, 3))
    mem.store("X", np.array([[1.0 + 2**-10, 3.14159, 1e-3]], np.float32))
    x = mem.hbm("X")
    assert x[0, 0] == 1.0  # bf16 keeps 8 bits of mantissa
    assert x[0, 1] == pytest.approx(3.140625)


def test_fp32_tensor_in_fp16_memory():
    mem = Memory(1 << 16, dtype="fp16")
    mem.put("m", np.array([1.0 + 2**-20], np.float32), dtype="fp32")
    mem.load("m")
    assert mem.counters.hbm_read_bytes == 4 and mem.hbm("m")[0] == np.float32(1.0 + 2**-20)


def test_mask_dtype_one_byte_exact():
    assert storage_bytes(MASK_DTYPE) == 1 and storage_bytes("uint8") == 1 and storage_bytes("fp16") == 2
    mem = Memory(1 << 16)
    mem.put("M", np.array([[0, 3], [1, 0]]), dtype="bool")
    m = mem.load("M")
    assert mem.counters.hbm_read_bytes == 4 and np.array_equal(m, [[0, 1], [1, 0]])
    mem.empty("M2", (2, 2), dtype="bool")
    mem.store("M2", m)
    assert mem.counters.hbm_write_bytes == 4


def test_sram_capacity_error_names_bytes():
    mem = Memory(sram_capacity_bytes=100, dtype="fp32")
    mem.put("K", np.ones((10, 4)))
    mem.load("K", rows=slice(0, 5), as_name="a")  # 80 bytes
    with pytest.raises(SramCapacityError, match=r"needed.*available.*use smaller blocks"):
        mem.load("K", rows=slice(5, 10), as_name="b")
    mem.free("a")
    mem.load("K", rows=slice(5, 10), as_name="b")
    assert mem.counters.sram_peak_bytes == 80


def test_count_once_and_reuse():
    mem = Memory(1 << 16, dtype="fp16")
    mem.put("A", np.ones((4, 4)))
    for _ in range(3):
        mem.load("A", tile=(0,), count_once=True)
    assert mem.counters.hbm_read_bytes == 32 and mem.counters.reuse_bytes == 64
    mem.forget_reuse()
    mem.load("A", tile=(0,), count_once=True)
    assert mem.counters.hbm_read_bytes == 64


def test_events_and_callback():
    seen = []
    mem = Memory(1 << 16, on_event=seen.append)
    mem.put("Q", np.ones((4, 4)))
    mem.load("Q", tile=(0,), stats={"m": np.zeros(4)})
    mem.compute(128, tile=(0, 0), note="S = QKᵀ")
    mem.free_all()
    assert [e.kind for e in mem.events] == ["load", "compute", "free"] == [e.kind for e in seen]
    assert mem.events[1].flops == 128 and mem.counters.flops == 128
    assert mem.events[0].sram_in_use_bytes == 32 and mem.sram_in_use_bytes == 0
    quiet = Memory(1 << 16, record_events=False)
    quiet.put("Q", np.ones((2, 2)))
    quiet.load("Q")
    assert quiet.events == [] and quiet.counters.hbm_read_bytes == 8


def test_counters_add_mul_eq():
    a = Counters()
    a.add_read("Q", 10)
    a.add_write("O", 4)
    a.flops, a.sram_peak_bytes = 7, 100
    b = a * 3
    assert (b.hbm_read_bytes, b.hbm_write_bytes, b.flops, b.sram_peak_bytes) == (30, 12, 21, 100)
    s = a + b
    assert s.hbm_bytes == 56 and s.read_bytes_by_tensor["Q"] == 40 and s.sram_peak_bytes == 100
    assert a * 1 == a and a != b
    assert s.as_dict()["read_bytes_by_tensor"] == {"Q": 40}


def test_helpers():
    assert largest_fitting_block(lambda b: b * 1024, 100 * 1024) == 64
    assert largest_fitting_block(lambda b: b * 1024, 10) == 0
    assert check_tile_set_fits({"Q": 10, "K": 20}, 30) == 30
    with pytest.raises(SramCapacityError, match="use block_c ≤ 8"):
        check_tile_set_fits({"Q": 10, "K": 20}, 29, fix="use block_c ≤ 8")
    check_host_budget(10, 100)
    with pytest.raises(MemoryBudgetError, match="count mode"):
        check_host_budget(101, 100)
    with pytest.raises(FlashsimError, match="positive"):
        Memory(0)
