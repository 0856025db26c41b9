"""The recorded GPU results (flashsim/course/recorded/): copies of the raw record that never drift, read by one
function (flashsim.course.kit.results.load_result)."""
import json
from pathlib import Path

import pytest

from flashsim.course.kit import results
from flashsim.errors import FlashsimError

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "flashsim" / "course" / "recorded"


@pytest.mark.parametrize("name", results.recorded_names())
def test_each_recorded_copy_equals_its_raw_source(name):
    source = ROOT / results.result_source(name)
    assert source.is_file(), f"{name}: manifest points at {source}, which is not there"
    assert source.parts[len(ROOT.parts)] == "benchmarks", "copies come from the raw record under benchmarks/"
    assert (RECORDED / f"{name}.json").read_bytes() == source.read_bytes(), (
        f"{name} drifted from {source.name}: run python -m flashsim.course.kit.results --sync")
    assert results.load_result(name) == json.loads(source.read_text())


def test_the_folder_holds_exactly_the_manifest():
    on_disk = {p.stem for p in RECORDED.glob("*.json")} - {"manifest"}
    assert on_disk == set(results.recorded_names())
    assert results.drift() == []


def test_load_result_accepts_the_suffix_and_names_the_choices():
    assert results.load_result("flash_decoding_h200.json") == results.load_result("flash_decoding_h200")
    with pytest.raises(FlashsimError, match="kernels_h200"):
        results.load_result("kernels_b200")
    with pytest.raises(FlashsimError):
        results.load_result("manifest")


def test_chapters_09_12_13_have_their_results():
    names = set(results.recorded_names())
    assert {"kernels_h200", "attention_speed_h200", "tune_h200", "tune_h200_wide", "flash_decoding_h200",
            "distributed_h200"} <= names
    assert results.load_result("kernels_h200")["ncu_sweep"]
    assert results.load_result("tune_h200")["results"]


def test_sync_refreshes_a_drifted_copy(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    (root / "flashsim" / "course" / "recorded").mkdir(parents=True)
    (root / "benchmarks" / "results").mkdir(parents=True)
    for p in RECORDED.iterdir():
        (root / "flashsim" / "course" / "recorded" / p.name).write_bytes(p.read_bytes())
    for name in results.recorded_names():
        src = root / results.result_source(name)
        src.parent.mkdir(parents=True, exist_ok=True)
        src.write_bytes((ROOT / results.result_source(name)).read_bytes())
    src = root / results.result_source("distributed_h200")
    src.write_text(json.dumps({"runs": []}))
    monkeypatch.setattr(results, "_recorded", lambda: root / "flashsim" / "course" / "recorded")
    assert results.drift(root) == ["distributed_h200"]
    assert results.main(["--check", "--root", str(root)]) == 1
    assert results.sync(root) == ["distributed_h200"]
    assert results.load_result("distributed_h200") == {"runs": []} and results.drift(root) == []
    with pytest.raises(FlashsimError, match="checkout"):
        results.sync(tmp_path / "nowhere")


def test_chapters_06_10_12_have_what_a_lab_only_install_shows():
    peak = results.load_result("cpu_peak_memory")["cpu"]
    assert all(r["naive numpy"] and r["flash (numba)"] for r in peak if r["N"] <= 16384)
    speed = results.load_result("cpu_speed")
    assert speed["speed"] and speed["block_sweep"]["points"]
    grade = results.load_result("grade_final_h200")
    assert grade["kernels"]["solution"]["passed"] and grade["interpreter"]["solution"]["passed"]


def test_provenance_label_says_where_and_when_in_one_form():
    from flashsim.course.kit.results import measured_on_label, provenance_label
    one = {"versions": {"gpu": "NVIDIA H100 80GB HBM3", "date_utc": "2026-12-06 04:57:34"}}
    assert provenance_label(one) == "NVIDIA H100 80GB HBM3, 2026-12-06"
    assert measured_on_label(one) == "measured on an NVIDIA H100 80GB HBM3, 2026-12-06"
    two = {"info": {"gpus": ["NVIDIA H200", "NVIDIA H200"], "date_utc": "2026-11-29"}}
    assert provenance_label(two) == "2 × NVIDIA H200, 2026-11-29"
    assert measured_on_label(two) == "measured on 2 × NVIDIA H200, 2026-11-29"
    cpu = {"machine": {"cpu": "AMD EPYC 9454"}, "date": "2026-11-29"}
    assert provenance_label(cpu) == "AMD EPYC 9454, 2026-11-29"
    assert provenance_label({}) == "a GPU"
