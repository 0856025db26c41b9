"""flashsim.errors: one hierarchy; every bad input gets a message that names the fix (chapter 01)."""
import pytest

import flashsim
from flashsim.errors import FlashsimError, MemoryBudgetError, SramCapacityError
from flashsim.model.problem import make_problem


def test_hierarchy():
    assert issubclass(SramCapacityError, FlashsimError) and issubclass(MemoryBudgetError, FlashsimError)
    assert issubclass(FlashsimError, ValueError)  # callers catching ValueError keep working
    assert flashsim.FlashsimError is FlashsimError


@pytest.mark.parametrize("kwargs,fix", [
    (dict(n=0), "e.g. n=64"),
    (dict(d=-2), "e.g. d=64"),
    (dict(block_r=0), "e.g. block_r=64"),
    (dict(block_c=True), "positive integer"),
    (dict(dtype="int4"), "use one of ['bf16', 'fp16', 'fp32']"),
    (dict(stats_dtype="fp64"), "use one of"),
    (dict(device="tpu"), "use one of"),
    (dict(algo="linear"), "use one of ['naive', 'eager', 'flash1', 'flash2']"),
    (dict(dropout_p=-0.1), "[0, 1)"),
])
def test_make_problem_messages_name_the_fix(kwargs, fix):
    args = dict(algo="flash2", n=64, d=16)
    args.update(kwargs)
    with pytest.raises(FlashsimError) as e:
        make_problem(**args)
    assert fix in str(e.value)


def test_errors_are_raised_before_numpy():
    """A bad size never reaches numpy: the error is flashsim's, with no numpy frame in the traceback."""
    with pytest.raises(FlashsimError) as e:
        flashsim.simulate("naive", -1, 64)
    frames = [tb.name for tb in e.traceback]
    assert not any("numpy" in str(tb.path) for tb in e.traceback), frames


def test_sram_error_names_needed_available_and_fit():
    with pytest.raises(SramCapacityError) as e:
        flashsim.traffic("flash2", 4096, 128, block_r=256, block_c=256, device="t4")
    msg = str(e.value)
    assert "needs" in msg and "64 KiB" in msg and "≤" in msg
