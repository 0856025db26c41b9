"""The course's shared infrastructure: sizes, the device report, real_gpu.compare, figures, and every notebook's shape.

The notebook checks apply to every chapter: committed without outputs; learning goals, a takeaway, an
"On the real GPU" section, an ipywidgets control, a plot call and 2–4 ``check_...`` calls.
"""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from flashsim import course
from flashsim.errors import FlashsimError

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


# --- sizes ------------------------------------------------------------------------------------------------------

def test_pick_follows_flashsim_size(monkeypatch):
    monkeypatch.setenv("FLASHSIM_SIZE", "small")
    assert course.size() == "small" and course.is_small() and course.pick(small=1, full=2) == 1
    monkeypatch.setenv("FLASHSIM_SIZE", "full")
    assert course.size() == "full" and course.pick(small=1, full=2) == 2
    monkeypatch.delenv("FLASHSIM_SIZE")
    assert course.size() == "full" and course.pick(small="a", full="b") == "b"
    monkeypatch.setenv("FLASHSIM_SIZE", " Small ")
    assert course.pick(small=1, full=2) == 1


def test_unknown_size_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("FLASHSIM_SIZE", "tiny")
    with pytest.raises(FlashsimError, match="FLASHSIM_SIZE=small"):
        course.pick(small=1, full=2)


# --- device report ----------------------------------------------------------------------------------------------

def test_device_report_names_device_and_versions():
    rep = course.device_report()
    assert rep.device
    if not rep.gpu:
        assert rep.device == "Triton interpreter on CPU" and rep.interpreter
    for pkg in ("python", "torch", "triton", "numpy", "numba"):
        assert rep.versions[pkg], pkg
    text = str(rep)
    assert "device:" in text and "torch" in text
    assert "<table>" in rep._repr_html_()
    json.dumps(rep.as_dict())


def test_course_map_has_one_line_per_chapter():
    numbers = [row[0] for row in course.COURSE_MAP]
    assert numbers == [f"{i:02d}" for i in range(15)]
    assert len(course.course_map().rows) == 15
    listed = {row[1] for row in course.COURSE_MAP}
    for nb in NOTEBOOKS:  # every notebook that exists is on the map, under its real file name
        assert nb.name in listed, f"{nb.name} is not in flashsim.course.COURSE_MAP"


def test_table_renders_text_and_html():
    t = course.Table(["a", "b"], [["x", 1234567], ["y", None]], "cap")
    s = str(t)
    assert "1,234,567" in s and "—" in s and s.startswith("cap")
    assert "<table>" in t._repr_html_() and "<caption>cap</caption>" in t._repr_html_()


# --- real_gpu.compare -------------------------------------------------------------------------------------------

def test_compare_measures_and_simulates_the_same_bytes_in_the_interpreter(capsys):
    from flashsim import kernels
    from flashsim.course.kit.real_gpu import compare
    r = compare("tiled_matmul", n=64, d=32, block_m=32, block_n=32)
    notice = capsys.readouterr().out
    assert notice.strip()  # the one-line notice
    if kernels.INTERPRETER:
        assert r.backend == "interpreter" and r.exact
        assert r.load_ratio == 1.0 and r.store_ratio == 1.0
        assert "interpreter" in notice
    elif r.backend == "ncu":      # a GPU with counters: the requested bytes exact; DRAM measured, per run
        assert r.exact and r.load_ratio == 1.0 and r.store_ratio == 1.0
        assert r.measured_dram_bytes > 0 and r.simulated_dram_bytes > 0
        assert "Nsight Compute" in notice and "run to run" in notice
    assert r.simulated_load_bytes > 0 and r.simulated_store_bytes > 0
    text = str(r.table())
    assert "measured" in text and "simulated" in text and "load bytes" in text and "store bytes" in text
    assert "<table>" in r.table()._repr_html_()
    from matplotlib.figure import Figure
    assert isinstance(r.plot(), Figure)
    again = compare("tiled_matmul", n=64, d=32, block_m=32, block_n=32, quiet=True)   # idempotent
    # the requested bytes repeat exactly; a GPU's DRAM bytes are what this run's L2 let through, and vary a little
    deterministic = [row for row in r.rows() if not row[0].startswith("DRAM")]
    assert [row for row in again.rows() if not row[0].startswith("DRAM")] == deterministic
    assert [row[0] for row in again.rows()] == [row[0] for row in r.rows()]


@pytest.mark.parametrize("kernel", ["naive", "online_softmax", "flash_fwd", "flash_bwd"])
def test_compare_every_kernel_at_small_size(kernel):
    from flashsim import kernels
    from flashsim.course.kit.real_gpu import compare
    if not kernels.INTERPRETER:
        pytest.skip("GPU runs are checked by the benchmarks, not in unit tests")
    r = compare(kernel, n=64, d=16, quiet=True)
    assert r.exact, r.table()


def test_compare_rejects_unknown_kernel():
    from flashsim.course.kit.real_gpu import compare
    with pytest.raises(FlashsimError, match="unknown kernel"):
        compare("flash_v9")


# --- figures ----------------------------------------------------------------------------------------------------

def test_figures_list_runs():
    out = subprocess.run([sys.executable, "-m", "flashsim.course.figures", "--list"], cwd=ROOT, capture_output=True,
                         text=True, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert "figures" in out.stdout and "traffic_vs_n" in out.stdout


def test_figure_registry_follows_the_convention(tmp_path):
    from flashsim.course import figures
    specs = figures.registry()
    assert {"matrix_bytes", "roofline_presets", "traffic_vs_n", "tiling", "fp16_overflow"} <= set(specs)
    paths = [s.path for s in specs.values()]
    assert len(paths) == len(set(paths))
    assert all(p.startswith("figures/") for p in paths)
    out = figures.render(specs["matrix_bytes"], root=tmp_path)
    assert out.exists() and out.stat().st_size > 1000


# --- notebooks --------------------------------------------------------------------------------------------------

def _cells(path):
    nb = json.loads(path.read_text())
    md = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    return nb, md, code


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 5


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_committed_without_outputs(path):
    nb, _, _ = _cells(path)
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            assert cell.get("outputs", []) == [], f"{path.name} cell {i} has outputs: run nbstripout"
            assert cell.get("execution_count") is None, f"{path.name} cell {i} has an execution count"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_has_the_course_shape(path):
    nb, md, code = _cells(path)
    mds = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]
    assert any(re.search(r"learning goals", m, re.I) for m in mds[:2]), "learning goals at the top"
    assert any(re.search(r"takeaway", m, re.I) for m in mds[-2:]), "a takeaway at the end"
    assert re.search(r"^#+\s*On the real GPU\s*$", md, re.M), 'a section titled exactly "On the real GPU"'
    assert re.search(r"\.show\(\)|ipywidgets", code), "at least one ipywidgets control"
    assert re.search(r"\bplots\.\w+\(|\.plot\(|\.figure\(", code), "at least one plot"
    checks = re.findall(r"\bcheck_\w+\s*\(", code)
    assert 2 <= len(checks) <= 4, f"2-4 exercises checked with check_...(): found {checks}"
    assert "FLASHSIM_SIZE" not in code or "pick(" in code, "sizes come from flashsim.course.pick"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_real_gpu_section_is_last_before_the_takeaway(path):
    nb, _, _ = _cells(path)
    heads = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown"
             and re.search(r"^#+\s*On the real GPU\s*$", "".join(c["source"]), re.M)]
    takeaways = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown"
                 and re.search(r"takeaway", "".join(c["source"]), re.I)]
    assert heads and takeaways and heads[-1] <= takeaways[-1]
    assert any(c["cell_type"] == "code" for c in nb["cells"][heads[-1]:]), "the section runs a kernel"
