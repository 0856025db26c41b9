"""Progress: passes recorded in a small JSON file under the data directory (FLASHSIM_DATA_DIR here), written
atomically, shown as chapters × exercises, and still there after a restart (another process)."""
import json
import os
import subprocess
import sys

import pytest

from flashsim import exercises
from flashsim.course.kit import progress
from flashsim.solutions import ch00


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("FLASHSIM_DATA_DIR", str(tmp_path))
    return tmp_path


def test_a_pass_is_recorded_and_shown(data_dir):
    assert progress.passed() == {}
    assert exercises.check_tensor_bytes(ch00.tensor_bytes, quiet=True)
    assert not exercises.check_transfer_time(lambda n, dev: 0.0, quiet=True)
    assert set(progress.passed()) == {"00.1"}
    assert json.loads((data_dir / "progress.json").read_text())["passed"].keys() == {"00.1"}
    table = exercises.progress()
    row = next(r for r in table.rows if r[0] == "00")
    assert "✔ 00.1" in row and "· 00.2" in row and row[-1] == "1/2"
    assert len(table.rows) >= 14 and "1 of" in table.caption
    assert not [p for p in os.listdir(data_dir) if p.startswith(".progress-")]   # no temporary file left


def test_progress_survives_a_restart(data_dir):
    env = dict(os.environ, FLASHSIM_DATA_DIR=str(data_dir))
    record = ("from flashsim import exercises; from flashsim.solutions import ch01; "
              "assert exercises.check_matmul_intensity(ch01.matmul_intensity, quiet=True)")
    subprocess.run([sys.executable, "-c", record], check=True, env=env)
    read = ("from flashsim.course.kit import progress; t = progress.progress(); "
            "print([r for r in t.rows if r[0] == '01'][0])")
    out = subprocess.run([sys.executable, "-c", read], check=True, env=env, capture_output=True, text=True).stdout
    assert "✔ 01.1" in out and "· 01.2" in out


def test_a_broken_file_reads_as_no_progress(data_dir):
    (data_dir / "progress.json").write_text("{not json")
    assert progress.passed() == {}
    progress.record("00.2")
    assert set(progress.passed()) == {"00.2"}
    progress.reset()
    assert progress.passed() == {}


def test_default_directory_is_platformdirs(monkeypatch):
    monkeypatch.delenv("FLASHSIM_DATA_DIR", raising=False)
    platformdirs = pytest.importorskip("platformdirs")
    assert progress.data_dir() == __import__("pathlib").Path(platformdirs.user_data_dir("flashsim", appauthor=False))
