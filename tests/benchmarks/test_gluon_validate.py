"""benchmarks/gluon_validate.py's CPU-side logic (the script itself times Gluon kernels on a Hopper GPU): the
command line's per-entry configuration overrides."""
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
