"""Chapter 14's predicted-against-measured table of the Gluon kernels (flashsim.course.ch14.measured_io): read from
the recorded ncu run, labelled from its own metadata, judged by the one criterion, and its predictions the model's
as it is now."""
import copy
import json
from pathlib import Path

import pytest

from flashsim.course.ch14 import measured_io as MI
from flashsim.course.kit.results import load_result
from flashsim.errors import FlashsimError
from flashsim.measure import gluon_io as GI

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "14_hopper_full_speed.ipynb"


def test_every_launch_is_read_with_its_label_from_the_run_itself():
    raw = load_result("gluon_io_h100")
    io = MI.measured_io()
    info = raw["info"]
    assert io["label"] == f"measured on an {info['gpu']}, {info['date_utc'][:10]}"
    launches = [L for r in raw["rows"] for L in r.get("launches", [])]
    assert len(io["rows"]) == len(launches) == 20
    assert [x["launch"] for x in io["rows"][:6]] == ["forward"] * 5 + ["backward: prologue"]
    for x, L in zip(io["rows"], launches):
        assert x["read_meas"] == L["meas_dram_read_bytes"] and x["write_pred"] == L["pred"]["dram_write_bytes"]
        assert x["requested_meas"] == L["meas_load_bytes"] + L["meas_store_bytes"]
    assert io["counts"]["all"]["launches"] == 20 and io["counts"]["fwd"]["launches"] == 5
    assert io["counts"]["all"]["requested_equal"] == 20


def test_the_recorded_predictions_are_the_models_today():
    """The table shows what flashsim.measure.gluon_io predicts now: requested bytes of the configurations that
    predict in a few seconds (the forward's stride and longest-first lists, both head dims of the backward, the
    ragged host passes), and the DRAM bytes of the two smallest (the whole record takes a minute)."""
    raw = load_result("gluon_io_h100")
    quick = {"fwd_fp16_d128_nc_4096", "fwd_fp16_d128_c_2048", "fwd_bf16_d128_c_3001", "bwd_fp16_d128_nc_2048",
             "bwd_bf16_d64_c_3001"}
    rows = [r for r in raw["rows"] if r["config"]["id"] in quick]
    assert len(rows) == len(quick)
    for r in rows:
        c = r["config"]
        small = c["N"] == 3001
        preds = {p.name: p for p in GI.launch_io(c["kernel"], c["B"], c["H"], c["N"], c["d"], c["dtype"],
                                                c["causal"], hardware="h100", dram=small)}
        for L in r["launches"]:
            p = preds[L["launch"]]
            assert (p.lsu_load_bytes, p.lsu_store_bytes) == (L["pred"]["lsu_load_bytes"], L["pred"]["lsu_store_bytes"])
            if small:
                assert (p.dram_read_bytes, p.dram_write_bytes) == (L["pred"]["dram_read_bytes"],
                                                                   L["pred"]["dram_write_bytes"])


def test_verdicts_come_from_the_criterion_not_from_the_file():
    raw = copy.deepcopy(load_result("gluon_io_h100"))
    L = raw["rows"][0]["launches"][0]
    L["dram_ok"] = False                                   # a stale verdict in the file is not read
    L["pred"]["dram_read_bytes"] = L["meas_dram_read_bytes"]
    L["pred"]["dram_write_bytes"] = L["meas_dram_write_bytes"]
    assert MI.measured_io(raw)["rows"][0]["dram_ok"]
    L["pred"]["dram_read_bytes"] = int(L["meas_dram_read_bytes"] * 1.2)
    x = MI.measured_io(raw)["rows"][0]
    assert not x["read_ok"] and x["write_ok"]
    assert "+20%" in str(MI.measured_io_table(raw)).splitlines()[3]      # caption, header, rule, row


def test_table_caption_and_bad_input():
    table = MI.measured_io_table()
    assert table.caption.startswith("Gluon kernels, MiB predicted / measured on ")
    assert "requested bytes equal in 20/20 launches" in table.caption
    assert len(table.rows) == 20 and table.header[2] == "requested"
    with pytest.raises(FlashsimError, match="no 'rows'"):
        MI.measured_io({"info": {}})


def test_the_chapter_shows_the_table_in_its_own_section():
    nb = json.loads(NOTEBOOK.read_text())
    cells = nb["cells"]
    i = next(k for k, c in enumerate(cells) if "".join(c["source"]).startswith("## Predicted against measured bytes"))
    section = "".join(cells[i]["source"])
    assert 150 <= len(section.split()) <= 260
    assert "widgets.measured_io_table()" in "".join(cells[i + 1]["source"])
