"""benchmarks/results/README.md indexes every file of benchmarks/results/ (and benchmarks/experiments/results/),
one line each, and names no file that is not there; the JSON records are written one record per line."""
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
EXPERIMENTS = ROOT / "benchmarks" / "experiments" / "results"
INDEX = RESULTS / "README.md"
LINE = re.compile(r"^- `([^`]+)` — \S")
sys.path.insert(0, str(ROOT / "tools"))
import compact_json  # noqa: E402


def _indexed() -> list:
    """The path (relative to benchmarks/results/) each index line names, in order."""
    return [m.group(1) for m in map(LINE.match, INDEX.read_text().splitlines()) if m]


def _on_disk() -> set:
    files = {p.name for p in RESULTS.iterdir() if p.is_file()}
    files |= {f"../experiments/results/{p.name}" for p in EXPERIMENTS.iterdir() if p.is_file()}
    return files


def test_every_result_file_has_one_index_line():
    indexed = _indexed()
    missing = sorted(_on_disk() - set(indexed))
    assert not missing, f"add a line '- `NAME` — what it shows; who cites it' to {INDEX.name} for: {missing}"
    twice = sorted({p for p in indexed if indexed.count(p) > 1})
    assert not twice, f"{INDEX.name} lists these more than once: {twice}"


def test_every_index_line_names_a_file():
    gone = sorted(set(_indexed()) - _on_disk())
    assert not gone, f"{INDEX.name} names files that are not there (delete the line or restore the file): {gone}"
    bullets = [l for l in INDEX.read_text().splitlines() if l.startswith("- ")]
    bad = [l for l in bullets if not LINE.match(l)]
    assert not bad, f"index lines must read '- `NAME` — what it shows; who cites it': {bad}"


def test_results_stay_few():
    assert len([p for p in RESULTS.iterdir() if p.is_file()]) < 50, "prune superseded runs (git keeps them)"


@pytest.mark.parametrize("path", sorted(RESULTS.glob("*.json")) + sorted(EXPERIMENTS.glob("*.json")),
                         ids=lambda p: p.name)
def test_json_results_are_one_record_per_line(path):
    text = path.read_text()
    assert compact_json.dumps(json.loads(text)) + "\n" == text, (
        f"{path.name}: run python tools/compact_json.py {path.relative_to(ROOT)}")
