"""benchmarks/gluon_validate.py's CPU-side logic (the script itself times Gluon kernels on a Hopper GPU): the
command line's per-entry configuration overrides, and the timing's interleaving and intervals."""
import math
import time

import pytest

from benchmarks import gluon_validate

ENTRIES = [(64, False), (64, True), (128, False), (128, True)]


@pytest.fixture(scope="module")
def gv():
    return gluon_validate


def test_named_entries_and_a_flat_override(gv):
    got = gv.entry_overrides('{"d64_causal1": {"STAGES": 4}, "d128_causal0": {"PINGPONG": false}}', ENTRIES)
    assert got == {(64, True): {"STAGES": 4}, (128, False): {"PINGPONG": False}}
    assert gv.entry_overrides('{"LSE_SMEM": true}', ENTRIES, flat_ok=True) == {e: {"LSE_SMEM": True} for e in ENTRIES}
    assert gv.entry_overrides(None, ENTRIES) == {} and gv.entry_overrides("", ENTRIES) == {}


@pytest.mark.parametrize("spec, match", [
    ('{"d64_casual1": {"STAGES": 4}}', r"unknown configuration entries \['d64_casual1'\].*d64_causal1"),
    ('{"d96_causal0": {}}', "unknown configuration entries"),
    ('{"LSE_SMEM": true}', "unknown configuration entries"),         # a flat override where only entries may go
    ('[1, 2]', "must be a JSON object"),
    ('{"d64_causal1": 3}', "each entry's overrides must be a JSON object"),
])
def test_bad_overrides_say_what_is_wrong(gv, spec, match):
    with pytest.raises(ValueError, match=match):
        gv.entry_overrides(spec, ENTRIES)


class _FakeTimer:
    """time_calls' GPU side on the CPU: wall-clock marks, no flush; records the order of the calls."""

    def __init__(self):
        self.flushes = 0

    def flush(self):
        self.flushes += 1

    @staticmethod
    def mark():
        return time.perf_counter()

    @staticmethod
    def elapsed_ms(a, b):
        return (b - a) * 1e3

    def sync(self):
        pass


def test_time_calls_interleaves_every_kernel_once_per_iteration_and_times_each_call():
    from benchmarks.gluon_bench import timing
    calls = []

    def kernel(name, seconds):
        def fn():
            calls.append(name)
            time.sleep(seconds)
        return fn

    fns = {"fast": kernel("fast", 0.001), "slow": kernel("slow", 0.003), "bad": lambda: 1 / 0}
    timer = _FakeTimer()
    per, errors = timing.time_calls(fns, warmup=0, rep=0, iters=12, seed=3, timer=timer)
    assert errors["bad"].startswith("ZeroDivisionError") and per["bad"] == [None] * 12
    timed = calls[-24:]                              # the 12 timed iterations, two calls each
    assert all(sorted(timed[2 * i:2 * i + 2]) == ["fast", "slow"] for i in range(12))
    assert len({tuple(timed[2 * i:2 * i + 2]) for i in range(12)}) == 2          # the order is shuffled
    assert timer.flushes >= 24                       # an L2 flush before every timed call
    median, low, high = timing.round_ratio(per, "slow", "fast")
    assert 1.8 < median < 4.5 and low <= median <= high


def test_median_interval_is_min_max_for_few_rounds_and_narrower_for_many():
    from benchmarks.gluon_bench.timing import median_interval
    assert median_interval([3, 1, 2, 5, 4]) == (1, 5)
    assert median_interval(list(range(8))) == (0, 7)
    assert median_interval(list(range(60))) == (22, 37)
    # coverage: P(median outside the interval) <= 6.25 % under the binomial law, and the next-narrower one is not
    n, k = 60, 23
    below = sum(math.comb(n, j) for j in range(k)) / 2 ** n
    assert 2 * below <= 0.0625 < 2 * (below + math.comb(n, k) / 2 ** n)
