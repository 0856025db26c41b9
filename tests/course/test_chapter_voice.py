"""No words of the workshop in a chapter's prose (issue 25): a learner reads a lesson, not our lab notebook.

Machine kinds (``nvidia-h200-x2``), "lent", "committed kernel", repository paths of recorded results
(``benchmarks/...``, ``results/...``), result-file and run names (``kernels_h200``, ``gluon_bwd_lse_smem_h200``),
and run dates (``2026-11-30``) stay in ``benchmarks/results/`` and its NOTES.md. A chapter that shows a recorded
number says "measured on <GPU>, <date>" by printing it from the record's own metadata
(:func:`flashsim.course.kit.real_gpu.measured_on`), never in its markdown.
"""
import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("[0-9][0-9]_*.ipynb"))

#: (what it is, pattern): each a phrase only the workshop uses
WORKSHOP_WORDS = [
    ("a machine kind", re.compile(r"\bnvidia-[ah]\d+\w*(-x\d+)?", re.I)),
    ('"lent"', re.compile(r"\blent\b", re.I)),
    ('"committed kernel"', re.compile(r"\bcommitted kernels?\b", re.I)),
    ("a repository path of results", re.compile(r"\bbenchmarks/|\bresults/|\bexperiments/")),
    ("a result file or run name", re.compile(r"\b[a-z][a-z0-9]*(_[a-z0-9]+)*_h[12]00\b(_\w+)?|\.json\b")),
    ("a run date", re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")),
    ("the history of attempts", re.compile(r"\b(first version|predates that change|the run shown here)\b", re.I)),
]


def _markdown(path: Path) -> list[tuple[int, str]]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return [(i, "".join(c["source"])) for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_no_workshop_words_in_chapter_prose(path):
    found = [f"cell {i}: {what}: {m.group(0)!r}" for i, text in _markdown(path)
             for what, pattern in WORKSHOP_WORDS for m in pattern.finditer(text)]
    assert not found, f"{path.name} speaks the workshop's words:\n  " + "\n  ".join(found)


def test_the_catalogue_catches_each_kind():
    samples = ["on 2 GPUs (`nvidia-h200-x2`)", "on the lent H200", "the committed kernel",
               "`benchmarks/results/kernels_h200_2026-11-30.json`", "gluon_bwd_lse_smem_h200", "run of 2026-12-02",
               "the run shown here predates that change"]
    for text in samples:
        assert any(p.search(text) for _, p in WORKSHOP_WORDS), text
    for fine in ["an NVIDIA H200", "the H100 and H200", "`flashsim.model.kernel_io`", "`TUNED_H200`",
                 "talent", "64 KiB"]:
        assert not any(p.search(fine) for _, p in WORKSHOP_WORDS), fine
