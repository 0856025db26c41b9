"""No invented URL anywhere; the repository URL lives in one place ([project.urls]); the files a reusable course
needs are there and the README links them; the Colab cell tool touches only its own cell."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib

import pytest
import yaml
from packaging_helpers import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import sync_notebook_header as header

INVENTED = "flashsim" + "/flashsim"  # the repository the old badges pointed at, which does not exist
README = (ROOT / "README.md").read_text()


def _repo_files():
    """(name, text) of every file git tracks or would track (untracked, not ignored), text files only."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, check=True).stdout
    for name in sorted(set(out.decode().split("\0")) - {""}):
        path = ROOT / name
        if path.is_file() and path.stat().st_size < 5_000_000:
            try:
                yield name, path.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                continue


def test_no_file_names_the_invented_repository():
    hits = [name for name, text in _repo_files() if INVENTED in text]
    assert not hits, f"{INVENTED} (a repository that does not exist) is named in {hits}"


def test_repository_urls_follow_from_project_urls():
    """Binder/Colab links and git+ installs name only [project.urls] Repository (or the README's OWNER/NAME)."""
    repo = header.repository()
    slug = re.sub(r"^https://github\.com/|\.git$|/$", "", repo) if repo else None
    pattern = re.compile(r"(?:mybinder\.org/v2/gh|colab\.research\.google\.com/github|git\+https://github\.com)"
                         r"/([\w.-]+/[\w.-]+)")
    bad = [(name, m.group(1)) for name, text in _repo_files() for m in pattern.finditer(text)
           if m.group(1) not in {"OWNER/NAME", slug}]
    assert not bad, f"repository URLs not from [project.urls]: {bad}"


def test_readme_badges_are_what_the_repository_url_gives():
    assert header.sync_readme(ROOT / "README.md", header.repository(), write=False) == "ok"
    if header.repository() is None:
        assert "mybinder.org/badge" not in README and "colab-badge" not in README


def test_license_citation_contributing_changelog_are_there_and_linked():
    for name in ("LICENSE", "LICENSE-CONTENT", "CITATION.cff", "CONTRIBUTING.md", "CHANGELOG.md"):
        assert (ROOT / name).is_file(), name
        assert f"]({name})" in README.split("## The course")[0], f"the README's top does not link {name}"
    assert "MIT License" in (ROOT / "LICENSE").read_text()
    assert "CC BY 4.0" in (ROOT / "LICENSE-CONTENT").read_text()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT AND CC-BY-4.0"
    assert project["license-files"] == ["LICENSE", "LICENSE-CONTENT"]


def test_citation_carries_the_version():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    init = (ROOT / "flashsim" / "__init__.py").read_text()
    version = re.search(r'^__version__ = "([^"]+)"', init, flags=re.MULTILINE).group(1)
    assert cff["cff-version"] == "1.2.0" and cff["version"] == version
    assert set(cff["license"]) == {"MIT", "CC-BY-4.0"}


def test_contributing_covers_chapter_exercise_kernel_and_layers():
    text = (ROOT / "CONTRIBUTING.md").read_text()
    for heading in ("## Layout", "## Adding a chapter", "## Adding an exercise", "## Adding a kernel",
                    "## The website"):
        assert heading in text
    assert ".importlinter" in text


def test_pre_commit_runs_nbstripout_and_ruff():
    hooks = [h["id"] for r in yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())["repos"]
             for h in r["hooks"]]
    assert {"nbstripout", "ruff"} <= set(hooks)


def test_sync_tool_touches_only_its_cell(tmp_path):
    (source,) = (ROOT / "notebooks").glob("05_*.ipynb")
    nb_path = tmp_path / source.name
    nb_path.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    before = json.loads(nb_path.read_text())
    before["cells"] = [c for c in before["cells"] if header.TAG not in c.get("metadata", {}).get("tags", [])]
    nb_path.write_text(json.dumps(before, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")

    assert header.sync_notebook(nb_path, header.cell_source(None)) == "inserted"
    after = json.loads(nb_path.read_text())
    cell = after["cells"][1]
    assert header.TAG in cell["metadata"]["tags"] and cell["outputs"] == [] and cell["execution_count"] is None
    assert after["cells"][:1] + after["cells"][2:] == before["cells"], "only the set-up cell was added"
    assert {k: v for k, v in after.items() if k != "cells"} == {k: v for k, v in before.items() if k != "cells"}
    assert header.sync_notebook(nb_path, header.cell_source(None)) == "ok"

    assert header.sync_notebook(nb_path, header.cell_source("https://github.com/OWNER/NAME")) == "updated"
    again = json.loads(nb_path.read_text())
    assert 'FLASHSIM_REPOSITORY = \'https://github.com/OWNER/NAME\'' in "".join(again["cells"][1]["source"])
    assert again["cells"][:1] + again["cells"][2:] == before["cells"]


def test_sync_tool_leaves_a_differently_formatted_notebook_alone(tmp_path):
    path = tmp_path / "x.ipynb"
    path.write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))  # no indent
    assert header.sync_notebook(path, header.cell_source(None)).startswith("skipped")


def test_notebooks_carry_the_current_colab_cell():
    notebooks = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    tagged = [p.name for p in notebooks if header.TAG in p.read_text()]
    if not tagged:
        pytest.skip("no notebook has the Colab set-up cell yet: run python tools/sync_notebook_header.py")
    stale = {p.name: s for p in notebooks
             if (s := header.sync_notebook(p, header.cell_source(header.repository()), write=False)) != "ok"}
    assert not stale, f"run python tools/sync_notebook_header.py: {stale}"
