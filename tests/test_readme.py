"""The README says what the code does: its two commands, its course map, and its examples run."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

from flashsim.course import COURSE_MAP

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _code_blocks(lang):
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_readme_opens_with_the_two_commands():
    first = _code_blocks("bash")[0].strip().splitlines()
    assert [line.split("#")[0].strip() for line in first] == ["make lab", "make test"]
    assert README.index("make lab") < README.index("## ")


def test_course_map_lists_every_chapter_and_its_notebook_exists():
    for number, notebook, title, _what in COURSE_MAP:
        assert f"| {number} | [{title}](notebooks/{notebook}) |" in README
        assert (ROOT / "notebooks" / notebook).exists()
    listed = {nb for _n, nb, _t, _w in COURSE_MAP}
    on_disk = {p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    assert on_disk == listed, "every notebook belongs in the course map (flashsim.course.COURSE_MAP)"


def test_python_example_runs():
    example = next(b for b in _code_blocks("python") if "flashsim.traffic" in b)
    namespace = {}
    exec(example, namespace)  # noqa: S102 - the README's own example
    t = namespace["t"]
    assert t.hbm_read_bytes > 0 and t.time_s > 0


@pytest.mark.parametrize("line", [line.split("#")[0].strip() for block in _code_blocks("bash")
                                  for line in block.splitlines() if line.startswith("flashsim ")])
def test_cli_examples_run(line):
    args = line.split()[1:]
    proc = subprocess.run([sys.executable, "-m", "flashsim", *args], capture_output=True, text=True, timeout=300,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip()
