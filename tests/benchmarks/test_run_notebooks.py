"""benchmarks/run_notebooks.py --plain: each chapter's record (ok or the error), and what the run ran on."""
import json

import nbformat

from benchmarks import run_notebooks


def _notebook(path, *cells):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nbformat.write(nb, path)
    return path


def test_a_plain_run_records_each_notebook_and_the_versions(tmp_path, monkeypatch):
    monkeypatch.setenv("FLASHSIM_SIZE", "small")
    good = _notebook(tmp_path / "01_good.ipynb", "x = 1 + 1", "print(x)")
    bad = _notebook(tmp_path / "02_bad.ipynb", "y = 1", "raise ValueError('chapter broke')")
    out = tmp_path / "nb.json"
    assert run_notebooks.main([str(good), str(bad), "--plain", "--out", str(out)]) == 1
    result = json.loads(out.read_text())
    ok, broken = result["results"]
    assert (ok["notebook"], ok["ok"], ok["size"], ok["error"]) == ("01_good.ipynb", True, "small", None)
    assert broken["ok"] is False and "chapter broke" in broken["error"] and "02_bad.ipynb[cell 1]" in broken["error"]
    info = result["info"]
    assert info["python"] == result["python"] and info["command"] == result["command"]
    assert {"torch", "triton", "date_utc"} <= set(info)
