"""Long work is guarded (issue 13, item 8).

- Step mode estimates its time before it starts: past about 2 s it shows a tqdm progress bar (on stderr), and work
  that would take minutes is refused at once with a FlashsimError pointing to count mode (``flashsim.traffic``).
- The L2 model streams its tile trace (memory bounded by the cache and the resident programs, not by the number
  of tiles), and a trace that would take minutes to replay is refused up front, naming larger blocks or no l2.
"""
import time
import tracemalloc

import pytest

import flashsim
from flashsim.errors import FlashsimError
from flashsim.model.simulator import estimate_step_seconds


def test_step_mode_refuses_minutes_of_work_at_once():
    t0 = time.perf_counter()
    with pytest.raises(FlashsimError, match="traffic"):
        flashsim.simulate("flash2", 100000, 64, record_events=False)
    assert time.perf_counter() - t0 < 2.0


def test_step_mode_n20000_refused_or_under_a_minute():
    """The issue's N=20000 took 54 s silently: now the estimate says so before starting (refused here)."""
    est = estimate_step_seconds("flash2", 20000, 64)
    assert est > 10
    with pytest.raises(FlashsimError, match="count mode"):
        flashsim.simulate("flash2", 20000, 64, record_events=False, max_step_seconds=10)


def test_estimate_grows_with_the_work():
    small = estimate_step_seconds("flash2", 256, 64)
    big = estimate_step_seconds("flash2", 4096, 64)
    assert 0 < small < 1 < big
    assert estimate_step_seconds("flash2", 1024, 64, backward=True) > estimate_step_seconds("flash2", 1024, 64)
    assert estimate_step_seconds("naive", 1024, 64, heads=8) > estimate_step_seconds("naive", 1024, 64)


def test_progress_bar_shown_on_request(capsys):
    flashsim.simulate("flash2", 128, 16, record_events=False, progress=True)
    err = capsys.readouterr().err
    assert "%" in err and "step mode" in err


def test_no_progress_bar_for_quick_work(capsys):
    flashsim.simulate("flash2", 128, 16, record_events=False)
    assert capsys.readouterr().err == ""


def test_l2_model_refuses_huge_traces_at_once():
    t0 = time.perf_counter()
    with pytest.raises(FlashsimError, match="l2"):
        flashsim.traffic("flash1", 32768, 64, block_r=16, block_c=16, l2=True)
    with pytest.raises(FlashsimError, match="l2"):
        flashsim.traffic("flash2", 10**12, 64, l2=True)
    assert time.perf_counter() - t0 < 2.0


def test_l2_model_memory_bounded_by_its_working_set():
    """Doubling N (4× the tiles) must not grow the peak memory of the L2 replay 4× (it streams the trace)."""
    peaks = []
    for n in (2048, 4096):
        tracemalloc.start()
        flashsim.traffic("flash1", n, 64, block_r=32, block_c=32, l2=True)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert peaks[1] < 2 * peaks[0] + (1 << 20), peaks
