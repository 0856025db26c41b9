"""The calibration table: every fitted constant cites the kept results it was fitted on, by a key that the results
index maps to a file; the model reads it from there and restates nothing."""
import re
from pathlib import Path

import pytest

from flashsim.model import calibration, kernel_io
from flashsim.model.calibration import CALIBRATION

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
#: an index line that gives a calibration key: "- `FILE` — what it shows; ...; calibration table: `KEY`"
CITED = re.compile(r"^- `([^`]+)` — .*\bcalibration table: `([^`]+)`")


def _cited_files() -> dict:
    """{calibration key: file} from benchmarks/results/README.md."""
    pairs = [m.groups() for m in map(CITED.match, (RESULTS / "README.md").read_text().splitlines()) if m]
    keys = [k for _, k in pairs]
    assert len(keys) == len(set(keys)), f"a calibration key is given twice in the results index: {sorted(keys)}"
    return {k: f for f, k in pairs}


@pytest.mark.parametrize("name", sorted(CALIBRATION))
def test_each_constant_cites_kept_indexed_results(name):
    entry = CALIBRATION[name]
    assert entry.fitted_on and entry.method and entry.score and entry.what
    files = _cited_files()
    for key in entry.fitted_on + entry.checked_on:
        assert key in files, f"{name}: no line of benchmarks/results/README.md ends 'calibration table: `{key}`'"
        assert (RESULTS / files[key]).is_file(), f"{name}: {key} names {files[key]}, not in benchmarks/results/"
    assert getattr(calibration, name) == entry.value


def test_every_calibration_key_of_the_index_is_cited():
    cited = {k for e in CALIBRATION.values() for k in e.fitted_on + e.checked_on}
    assert set(_cited_files()) == cited, "the index gives calibration keys the table does not cite, or the reverse"


def test_the_kernel_view_uses_the_table():
    for name in CALIBRATION:
        assert getattr(kernel_io, name) is getattr(calibration, name)


def test_l2_and_kernel_io_restate_no_fitted_value():
    for module in ("l2.py", "kernel_io.py"):
        text = (ROOT / "flashsim" / "model" / module).read_text()
        for value in ("0.48", "0.63", "0.44", "0.6 "):
            assert not re.search(rf"(?<![\d.]){re.escape(value)}", text), f"{module} restates {value}"


def test_kernel_dram_settings_default_to_the_table_and_name_a_wrong_key():
    from flashsim.errors import FlashsimError
    s = kernel_io.L2Settings()
    assert (s.l2_fraction, s.protected_fraction, s.tile_costs, s.dirty_fraction, s.dirty_mix) == (
        calibration.L2_SHARED_FRACTION, calibration.L2_PROTECTED_FRACTION, calibration.L2_TILE_COSTS,
        calibration.L2_DIRTY_FRACTION, calibration.L2_DIRTY_MIX)
    args = ("flash_fwd", 1024, 64, 64, 64)
    assert kernel_io.kernel_dram(*args, settings=s)["total"] == kernel_io.kernel_dram(*args)["total"]
    assert kernel_io.kernel_dram(*args, settings=s._replace(flush_writes=True))["total"] == \
        kernel_io.kernel_dram(*args, flush_writes=True)["total"]
    with pytest.raises(FlashsimError, match="l2_fraction"):
        kernel_io.kernel_dram(*args, l2_frac=0.5)
