"""flashsim.measure.criterion: the DRAM criterion decided in issue 28, each term on its own, the strict reading
beside it, and clear errors for counts that are not counts."""
import math

import pytest
from hypothesis import given, strategies as st

from flashsim.errors import FlashsimError
from flashsim.measure import criterion as C

MIB = 1 << 20


def test_each_term_decides_where_it_is_largest():
    # 5 % of the direction: 1 GiB read, 50 MiB off passes, 52 does not
    assert C.within(1074 * MIB, 1024 * MIB, 1024 * MIB) and not C.within(1076 * MIB, 1024 * MIB, 1024 * MIB)
    # 1 % of the launch: 0.06 MiB written beside 1 GiB read, predicted 10 MiB: within 10.24 MiB
    assert C.within(10 * MIB, 0.06 * MIB, 1024.06 * MIB) and not C.within(11 * MIB, 0.06 * MIB, 1024.06 * MIB)
    # ncu's run-to-run spread, where it was measured: 3 MiB spread covers 3 MiB off in a 40 MiB launch
    assert not C.within(30 * MIB, 27 * MIB, 40 * MIB) and C.within(30 * MIB, 27 * MIB, 40 * MIB, 3 * MIB)
    assert C.tolerance_bytes(100, 1000) == 10 and C.tolerance_bytes(1000, 1000) == 50
    assert C.tolerance_bytes(100, 1000, spread=60) == 60


def test_strict_reading_is_five_percent_of_the_direction_alone():
    assert C.strict_ok(105, 100) and not C.strict_ok(105.01, 100)
    assert not C.strict_ok(10 * MIB, 0.06 * MIB)            # the near-empty direction fails strictly
    j = C.judge(1024 * MIB, 10 * MIB, 1024 * MIB, 0.06 * MIB)
    assert j["ok"] and j["read_ok"] and j["write_ok"] and j["strict_read_ok"] and not j["strict_ok"]
    assert j["write_tolerance_bytes"] == pytest.approx(0.01 * 1024.06 * MIB)


@given(meas_r=st.integers(0, 2**40), meas_w=st.integers(0, 2**40), err=st.integers(0, 2**37))
def test_strict_implies_the_criterion_and_over_and_under_weigh_alike(meas_r, meas_w, err):
    j = C.judge(meas_r + err, meas_w, meas_r, meas_w)         # byte counts: integers, exact in float64
    assert not j["strict_ok"] or j["ok"]                      # the criterion only ever widens the strict reading
    if err <= meas_r:                                         # under-prediction by as much: the same verdict
        assert C.judge(meas_r - err, meas_w, meas_r, meas_w)["read_ok"] == j["read_ok"]


def test_spread_of_repeats():
    assert C.spread_bytes([3, 7, 5]) == 4 and C.spread_bytes([3]) is None and C.spread_bytes(None) is None


@pytest.mark.parametrize("bad", [math.nan, math.inf, "lots", None])
def test_a_count_that_is_not_a_count_is_a_clear_error_never_a_verdict(bad):
    with pytest.raises(FlashsimError, match="measure again|must be a number"):
        C.within(1, bad, 10)
    with pytest.raises(FlashsimError, match="measure again|must be a number"):
        C.judge(1, 1, bad, 1)
    with pytest.raises(FlashsimError, match="measure again|must be a number"):
        C.within(bad, 1, 10)


def test_a_measurement_derived_by_subtraction_may_dip_below_zero_a_prediction_may_not():
    assert C.within(0, -0.1 * MIB, 100 * MIB) and C.spread_bytes([-0.2 * MIB, 0.1 * MIB]) == pytest.approx(0.3 * MIB)
    assert not C.strict_ok(0, -1)
    with pytest.raises(FlashsimError, match=">= 0"):
        C.within(-1, 0, 10)
