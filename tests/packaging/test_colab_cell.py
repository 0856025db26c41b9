"""The Colab set-up cell (tools/sync_notebook_header.py) installs flashsim beside Colab's own torch and numpy.

Its logic is tested in-process (what it runs, and where); then, in a venv made to look like Colab — another numpy
within flashsim's range (2.3.5, not the lock's 2.4.6), a torch that is not 2.13.0 (a stand-in distribution
``torch 2.6.0`` whose CUDA device says it is a Tesla T4: Colab's real torch is a CUDA build of several GB), and a
``google.colab`` module — the cell runs for real with flashsim's wheel as its source and must leave that numpy and
that torch as they were; the installed flashsim then simulates the faked T4 with the T4 preset.
"""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from packaging_helpers import ROOT, clean_env, make_venv, run

sys.path.insert(0, str(ROOT / "tools"))
import sync_notebook_header as header

COLAB_NUMPY = "2.3.5"
COLAB_TORCH = "2.6.0"


def _exec_cell(monkeypatch, *, colab: bool, source: str | None, installed: bool = False):
    """Run the cell's code here with subprocess.run recorded instead of run; returns the recorded commands."""
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: calls.append(cmd))
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: (object() if installed else None) if name == "flashsim"
                        else real_find_spec(name, *a))
    if colab:
        monkeypatch.setitem(sys.modules, "google.colab", type(sys)("google.colab"))
    else:
        monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    if source:
        monkeypatch.setenv("FLASHSIM_SOURCE", source)
    else:
        monkeypatch.delenv("FLASHSIM_SOURCE", raising=False)
    exec(header.cell_source(header.repository()), {})  # noqa: S102 - the cell's own code
    return calls


def test_cell_forces_no_version_and_asks_no_torch():
    cell = header.cell_source("https://github.com/example/flashsim")
    assert "==" not in cell and "torch" not in cell.split("\n", 1)[1].replace("Colab's own torch", "")
    assert '"flashsim[colab] @ "' in cell
    compile(cell, "cell", "exec")


def test_cell_does_nothing_outside_colab(monkeypatch):
    assert _exec_cell(monkeypatch, colab=False, source="file:///x.whl") == []


def test_cell_does_nothing_where_flashsim_is_installed(monkeypatch):
    assert _exec_cell(monkeypatch, colab=True, source="file:///x.whl", installed=True) == []


def test_cell_on_colab_installs_flashsim_colab_extra_from_the_source(monkeypatch):
    (cmd,) = _exec_cell(monkeypatch, colab=True, source="file:///tmp/flashsim.whl")
    assert cmd == [sys.executable, "-m", "pip", "install", "-q", "flashsim[colab] @ file:///tmp/flashsim.whl"]


def test_cell_on_colab_without_a_repository_says_so(monkeypatch, capsys):
    if header.repository():
        pytest.skip("[project.urls] Repository is set")
    assert _exec_cell(monkeypatch, colab=True, source=None) == []
    assert "no public repository yet" in capsys.readouterr().out


_STAND_IN_TORCH = f'''"""A stand-in for Colab's own torch: its version, and a CUDA device that says it is a T4."""
__version__ = "{COLAB_TORCH}"


class _T4:
    name, multi_processor_count, L2_cache_size = "Tesla T4", 40, 4 * 1024 * 1024
    shared_memory_per_block_optin, major, minor, total_memory = 64 * 1024, 7, 5, 15 * 1024**3


class cuda:
    is_available = staticmethod(lambda: True)
    device_count = staticmethod(lambda: 1)
    get_device_name = staticmethod(lambda index=0: _T4.name)
    get_device_properties = staticmethod(lambda index=0: _T4())
'''


def _stand_in_torch(out: Path) -> Path:
    """A tiny wheel named torch 2.6.0 (importable, with a version and a faked T4): where Colab's torch would be."""
    whl = out / f"torch-{COLAB_TORCH}-py3-none-any.whl"
    dist = f"torch-{COLAB_TORCH}.dist-info"
    files = {"torch/__init__.py": _STAND_IN_TORCH,
             f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {COLAB_TORCH}\n",
             f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: flashsim-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{dist}/RECORD"] = "".join(f"{name},,\n" for name in files) + f"{dist}/RECORD,,\n"
    with zipfile.ZipFile(whl, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return whl


@pytest.mark.packaging
@pytest.mark.slow
def test_cell_keeps_colabs_numpy_and_torch(wheel, tmp_path):
    python = make_venv(tmp_path / "colab")
    run([python, "-m", "pip", "install", "-q", f"numpy=={COLAB_NUMPY}", _stand_in_torch(tmp_path)], timeout=600)
    fake = tmp_path / "fake-colab" / "google" / "colab"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('"""A stand-in for Colab\'s google.colab: the cell only looks for it."""\n')
    code = "import google.colab\n" + header.cell_source(header.repository())
    env = clean_env(PYTHONPATH=str(tmp_path / "fake-colab"), FLASHSIM_SOURCE=wheel.as_uri())
    run([python, "-c", code], env=env, cwd=tmp_path, timeout=900)
    check = ("import json, importlib.metadata as m, numpy, torch, flashsim, ipympl\n"
             "from flashsim.measure.device import simulated_hardware\n"
             "t = flashsim.traffic('flash2', n=1024, d=64)\n"
             "print(json.dumps({'numpy': numpy.__version__, 'torch': torch.__version__, 'flashsim': "
             "m.version('flashsim'), 'bytes': t.hbm_read_bytes, 'file': flashsim.__file__, "
             "'preset': simulated_hardware().name}))")
    got = json.loads(run([python, "-c", check], cwd=tmp_path).stdout.strip().splitlines()[-1])
    assert got["numpy"] == COLAB_NUMPY and got["torch"] == COLAB_TORCH, "the cell replaced Colab's numpy or torch"
    assert got["bytes"] > 0 and "site-packages" in got["file"]
    assert got["preset"] == "Tesla T4", "on Colab's T4 the predictions use the T4 preset"
