"""A wheel installed non-editable in a bare environment with only ``[lab]`` (from the lock: no torch, no triton,
no numba) runs the chapters to their end (00–05 must; every chapter is run), and shows the recorded GPU results
(issue 14).

A kernel section there prints one line (what is missing, how to install it; :mod:`flashsim.course.kit.optional`)
and shows the measurement recorded on a GPU (:func:`flashsim.course.kit.real_gpu.recorded`). The notebooks run
with ``jupyter nbconvert --execute`` (what ``[lab]`` brings) in the venv's own kernel, at ``FLASHSIM_SIZE=small``.
"""
from __future__ import annotations

import json
import subprocess
import zipfile
from pathlib import Path

import pytest
from packaging_helpers import LOCK, ROOT, clean_env, make_venv, run

pytestmark = [pytest.mark.packaging, pytest.mark.slow, pytest.mark.xdist_group("lab_only")]

CHAPTERS = sorted(p.name[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))  # every one; 00-05 must pass
KERNEL_NAME = "flashsim-lab-only"
#: chapters that code outside packaging still stops in a lab-only install: chapter -> where, and why. Each still
#: runs, and xfails with its error; once its section asks flashsim.course.kit.optional.missing(...) first (one
#: line, then the recorded result), it passes: then drop it from here.
BLOCKED = {
    "06": "flashsim/course/ch06/dashboards.py:69: measure_peak_memory() imports torch unguarded",
    "07": "flashsim/course/ch07/dashboards.py: gradient_check() imports torch unguarded",
    "10": "flashsim/cpu/flash.py:14 imports numba; chapter 10's dashboards call it without asking missing('cpu')",
    "12": "notebooks/12_final_exercise.ipynb: its first code cell imports triton (and ch12/template.py needs it)",
    "13": "flashsim/multi/distributed.py:34 imports torch; notebook 13 imports it for the real ring",
    "14": "flashsim/course/ch12/dashboards.py:241: tuned_configs() (what widgets.tuned_configs is) imports "
          "flashsim.kernels._common (torch) unguarded; ch14's own tuned_configs asks missing('kernels')",
}


@pytest.fixture(scope="module")
def lab_python(wheel, tmp_path_factory) -> Path:
    """A fresh venv with flashsim's wheel and its [lab] extra, at the lock's versions, and its own kernel."""
    python = make_venv(tmp_path_factory.mktemp("lab-only") / "venv")
    run([python, "-m", "pip", "install", "-q", "-c", LOCK, f"flashsim[lab] @ {wheel.as_uri()}"], timeout=900)
    run([python, "-m", "ipykernel", "install", "--sys-prefix", "--name", KERNEL_NAME])
    return python


def test_wheel_ships_the_recorded_results_and_the_licenses(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    recorded = sorted(p.relative_to(ROOT).as_posix() for pattern in ("*.json", "*.md")
                      for p in (ROOT / "flashsim" / "course" / "recorded").glob(pattern))
    assert recorded, "flashsim/course/recorded/ has no JSON or Markdown files"
    assert set(recorded) <= set(names), f"not in the wheel: {sorted(set(recorded) - set(names))}"
    dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
    assert {f"{dist_info}/licenses/LICENSE", f"{dist_info}/licenses/LICENSE-CONTENT"} <= set(names)
    metadata = zipfile.ZipFile(wheel).read(f"{dist_info}/METADATA").decode()
    assert "License-Expression: MIT AND CC-BY-4.0" in metadata


def test_lab_only_has_no_torch_triton_or_numba_and_flashsim_is_the_wheel(lab_python):
    code = ("import importlib.util, json, flashsim; print(json.dumps({'file': flashsim.__file__, 'absent': "
            "[m for m in ('torch', 'triton', 'numba') if importlib.util.find_spec(m) is None]}))")
    got = json.loads(run([lab_python, "-c", code], cwd="/").stdout)
    assert got["absent"] == ["torch", "triton", "numba"]
    assert "site-packages" in got["file"] and not got["file"].startswith(str(ROOT))


def test_recorded_results_load_from_the_installed_wheel(lab_python):
    code = ("from flashsim.course.kit.results import load_result, recorded_names\n"
            "assert {'kernels_h200', 'tune_h200', 'flash_decoding_h200', 'distributed_h200'} <= set(recorded_names())\n"
            "assert load_result('kernels_h200')['ncu_sweep'] and load_result('flash_decoding_h200')['sweep']\n"
            "assert load_result('tune_h200') and load_result('distributed_h200')\n"
            "from flashsim.course.kit.real_gpu import compare\n"
            "r = compare('flash_fwd')\n"
            "assert r.measured_load_bytes and r.backend.startswith('ncu'), r\n")
    out = run([lab_python, "-c", code], cwd="/").stdout
    assert out.count("\n") == 1 and 'pip install "flashsim[kernels]"' in out, out
    # what chapters 09, 12/14 and 13 show from the recordings, read from the installed wheel (each may say in one
    # line that torch and triton are missing)
    charts = ("import flashsim.widgets as w\n"
              "assert w.l2_rows() and w.tuning_summary() and w.h200_results()['flash_decoding']\n")
    run([lab_python, "-c", charts], cwd="/")


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_runs_to_its_end_with_lab_only(lab_python, chapter, tmp_path):
    (notebook,) = (ROOT / "notebooks").glob(f"{chapter}_*.ipynb")
    cmd = [lab_python.parent / "jupyter", "nbconvert", "--to", "notebook", "--execute",
           f"--ExecutePreprocessor.kernel_name={KERNEL_NAME}", "--ExecutePreprocessor.timeout=600",
           "--output-dir", tmp_path, notebook]
    env = clean_env(FLASHSIM_SIZE="small")
    if chapter in BLOCKED:  # still run it: passes once the blocker is fixed (then drop it from BLOCKED)
        proc = subprocess.run([str(c) for c in cmd], env=env, capture_output=True, text=True, timeout=900,
                              check=False)
        if proc.returncode != 0:
            pytest.xfail(f"{BLOCKED[chapter]} -- {proc.stderr.strip().splitlines()[-1][:300]}")
    else:
        run(cmd, env=env, timeout=900)
    executed = json.loads((tmp_path / notebook.name).read_text())
    outputs = [o for c in executed["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o["output_type"] == "error"]
    source = notebook.read_text()
    if "compare(" in source:  # its "On the real GPU" section said, in one line, what is missing and how to get it
        text = "".join("".join(o.get("text", "")) for o in outputs if o["output_type"] == "stream")
        assert 'pip install "flashsim[kernels]"' in text
