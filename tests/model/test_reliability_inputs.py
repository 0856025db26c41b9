"""Input is never misread (issue 13, items 3, 4 and 11).

- Inputs of the wrong shape are rejected, not reshaped (only (batch, heads, N, d), (heads, N, d) when batch == 1,
  or (N, d) for one head); complex
  inputs are rejected; a wrong number of inputs gets a clear error.
- Booleans are strict, with one rule everywhere (make_problem, traffic, simulate): ``causal`` and ``backward``
  accept True/False (Python or numpy bools) and the integers 0 and 1; anything else, the string "False" included,
  is a FlashsimError that names the fix.
- The messages item 11 lists name the real fix.
"""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import flashsim
from flashsim.errors import FlashsimError, MemoryBudgetError
from flashsim.model.problem import make_problem

Q = np.random.default_rng(0).standard_normal((1, 64, 16)).astype(np.float32)


# --- item 3: shapes --------------------------------------------------------------------------------------------

def test_transposed_input_is_rejected_not_reshaped():
    with pytest.raises(FlashsimError, match=r"shape \(1, 16, 64\).*\(1, 64, 16\)"):
        flashsim.simulate("flash2", 64, 16, dtype="fp32", inputs=(Q.reshape(1, 16, 64), Q, Q))


def test_two_dimensional_input_is_fine_for_one_head():
    sim = flashsim.simulate("flash2", 64, 16, dtype="fp32", inputs=(Q[0], Q[0], Q[0]))
    assert sim.ok


def test_complex_input_is_rejected():
    with pytest.raises(FlashsimError, match="complex"):
        flashsim.simulate("flash2", 64, 16, dtype="fp32", inputs=(Q + 1j, Q, Q))


@pytest.mark.parametrize("inputs", [(Q, Q), (Q,), (Q, Q, Q, Q, Q)])
def test_wrong_number_of_inputs(inputs):
    with pytest.raises(FlashsimError, match=r"\(q, k, v\)"):
        flashsim.simulate("flash2", 64, 16, inputs=inputs)


def test_do_ignored_without_backward_is_still_shape_checked():
    with pytest.raises(FlashsimError, match="shape"):
        flashsim.simulate("flash2", 64, 16, inputs=(Q, Q, Q, Q.reshape(1, 32, 32)))


@st.composite
def same_size_shapes(draw):
    """A shape with the element count of (heads, N, d) (what the old check let through), or any other shape."""
    heads, n, d = draw(st.integers(1, 3)), draw(st.integers(1, 12)), draw(st.integers(1, 6))
    if draw(st.booleans()):
        size, shape = heads * n * d, []
        while size > 1 and len(shape) < 3:
            f = draw(st.sampled_from([k for k in range(1, size + 1) if size % k == 0]))
            shape.append(f)
            size //= f
        shape.append(size)
        shape = tuple(draw(st.permutations(shape)))
    else:
        shape = tuple(draw(st.lists(st.integers(1, 16), min_size=1, max_size=4)))
    return heads, n, d, shape


@given(case=same_size_shapes())
def test_any_other_shape_is_rejected(case):
    heads, n, d, shape = case
    if shape in ((heads, n, d), (1, heads, n, d)) or (heads == 1 and shape == (n, d)):
        return
    x = np.ones(shape, np.float32)
    good = np.ones((heads, n, d), np.float32)
    with pytest.raises(FlashsimError, match="shape"):
        flashsim.simulate("flash2", n, d, heads=heads, dtype="fp32", inputs=(good, x, good), record_events=False)


# --- item 4: booleans ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["False", "True", "false", "", "0", 2, -1, 0.5, None, [], "yes"])
@pytest.mark.parametrize("name", ["causal", "backward"])
def test_non_boolean_flags_are_rejected(name, value):
    with pytest.raises(FlashsimError, match=name):
        make_problem("flash2", 64, 16, **{name: value})
    with pytest.raises(FlashsimError, match=name):
        flashsim.traffic("flash2", 1024, 64, **{name: value})


@pytest.mark.parametrize("value,want", [(True, True), (False, False), (np.bool_(True), True),
                                        (np.bool_(False), False), (1, True), (0, False), (np.int64(1), True)])
def test_boolean_flags_accepted(value, want):
    p = make_problem("flash2", 64, 16, causal=value, backward=value)
    assert p.causal is want and p.backward is want


def test_traffic_causal_string_false_is_an_error_not_causal():
    with pytest.raises(FlashsimError, match="causal"):
        flashsim.traffic("flash2", 1024, 64, causal="False")


@given(value=st.one_of(st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True), st.text(max_size=6),
                       st.none(), st.sampled_from([np.bool_(True), np.bool_(False), np.int8(1), np.float32(1.0)])))
def test_one_strict_rule(value):
    """Either the value is a bool / 0 / 1 and means exactly that, or it is a FlashsimError."""
    is_bool = isinstance(value, (bool, np.bool_))
    is_01 = isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value in (0, 1)
    try:
        p = make_problem("flash1", 32, 8, causal=value)
    except FlashsimError:
        assert not (is_bool or is_01)
        return
    assert is_bool or is_01
    assert p.causal is bool(value)


# --- item 11: messages -------------------------------------------------------------------------------------------

def test_sram_bytes_zero_message_names_a_real_fix():
    with pytest.raises(FlashsimError) as e:
        flashsim.traffic("flash2", 64, 16, sram_bytes=0)
    msg = str(e.value)
    assert "sram_bytes=64" not in msg and "sram_bytes=None" in msg


def test_numpy_dtype_classes_are_accepted():
    assert flashsim.traffic("flash2", 64, 16, dtype=np.float16).dtype == "fp16"
    assert flashsim.traffic("flash2", 64, 16, dtype=np.float32).dtype == "fp32"
    assert flashsim.traffic("flash2", 64, 16, dtype=np.dtype("float16")).dtype == "fp16"


def test_unknown_dtype_message_is_readable():
    with pytest.raises(FlashsimError) as e:
        flashsim.traffic("flash2", 64, 16, dtype=np.int8)
    assert "<class" not in str(e.value) and "int8" in str(e.value)


def test_step_budget_message_does_not_suggest_what_is_already_set():
    with pytest.raises(MemoryBudgetError) as e:
        flashsim.simulate("flash2", 65536, 128, heads=64, record_events=False)
    assert "record_events=False" not in str(e.value) and "traffic" in str(e.value)


def test_negative_seed_is_a_clear_error():
    with pytest.raises(FlashsimError, match="seed"):
        flashsim.simulate("flash2", 64, 16, seed=-1)
