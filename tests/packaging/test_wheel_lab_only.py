"""A wheel installed non-editable in a bare environment with only ``[lab]`` (from the lock: no torch, no triton,
no numba) runs every chapter to its end, and shows the recorded GPU and CPU results (issue 14).

A kernel or CPU section there prints one line (what is missing, how to install it; :func:`flashsim.errors.missing`
through :mod:`flashsim.course.kit.optional`) and shows the measurement recorded on a GPU or a CPU
(:func:`flashsim.course.kit.real_gpu.recorded`, :mod:`flashsim.course.kit.results`). The notebooks run with
``jupyter nbconvert --execute`` (what ``[lab]`` brings) in the venv's own kernel, at ``FLASHSIM_SIZE=small``.
"""
from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from packaging_helpers import LOCK, ROOT, clean_env, make_venv, run

pytestmark = [pytest.mark.packaging, pytest.mark.slow, pytest.mark.xdist_group("lab_only")]

CHAPTERS = sorted(p.name[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))  # every one must pass
KERNEL_NAME = "flashsim-lab-only"


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
            "assert {'kernels_h200', 'tune_h200', 'flash_decoding_h200', 'distributed_h200', 'cpu_peak_memory',\n"
            "        'cpu_speed', 'grade_final_h200'} <= set(recorded_names())\n"
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
    run(cmd, env=clean_env(FLASHSIM_SIZE="small"), timeout=900)
    executed = json.loads((tmp_path / notebook.name).read_text())
    outputs = [o for c in executed["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o["output_type"] == "error"]
    source = notebook.read_text()
    text = "".join("".join(o.get("text", "")) for o in outputs if o["output_type"] == "stream")
    if "compare(" in source:  # its "On the real GPU" section said, in one line, what is missing and how to get it
        assert 'pip install "flashsim[kernels]"' in text
    if chapter in ("06", "10"):  # the CPU kernel's sections said that numba is missing, then showed the recording
        assert 'pip install "flashsim[cpu]"' in text and "recorded" in text
