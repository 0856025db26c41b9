"""The peak-memory model (flashsim.model.attention.memory_model): components, and max_context_for is exact."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flashsim.errors import FlashsimError
from flashsim.model.attention.memory_model import (
    attention_memory_bytes, io_bytes, logsumexp_bytes, max_context_for, score_matrix_bytes)


def test_components():
    n, d, bh, b = 1000, 64, 3, 2
    assert io_bytes(n, d, bh, b) == 4 * n * d * b * bh
    assert score_matrix_bytes(n, bh, b) == 2 * n * n * b * bh
    assert score_matrix_bytes(n, bh, 4, score_matrices=1) == 4 * n * n * bh  # numpy, S overwritten by P
    assert logsumexp_bytes(n, bh) == 4 * n * bh
    assert attention_memory_bytes("naive", n, d, bh, b) == io_bytes(n, d, bh, b) + score_matrix_bytes(n, bh, b)
    assert attention_memory_bytes("flash2", n, d, bh, b) == io_bytes(n, d, bh, b) + logsumexp_bytes(n, bh)
    with pytest.raises(FlashsimError, match="naive"):
        attention_memory_bytes("dense", n, d)


@settings(max_examples=100, deadline=None)
@given(cap=st.floats(1e3, 2e11), algo=st.sampled_from(["naive", "flash"]), d=st.sampled_from([16, 64, 128]),
       bh=st.integers(1, 64), b=st.sampled_from([2, 4]), mats=st.integers(1, 2))
def test_max_context_is_the_largest_that_fits(cap, algo, d, bh, b, mats):
    n = max_context_for(cap, algo, d, bh, b, score_matrices=mats)
    fits = lambda m: attention_memory_bytes(algo, m, d, bh, b, score_matrices=mats) <= cap  # noqa: E731
    assert (n == 0 or fits(n)) and not fits(n + 1)
