"""Insert or update the Colab set-up cell in every notebook, and the README's Binder/Colab badges.

    python tools/sync_notebook_header.py            # write
    python tools/sync_notebook_header.py --check    # exit 1, listing the notebooks that are not up to date

The cell (CELL below) is the first code cell of each chapter, tagged ``flashsim-colab-setup``. Outside Colab it
does nothing. On Colab it installs flashsim with the ``[colab]`` extra from the repository named in pyproject.toml's
``[project.urls] Repository``, and leaves Colab's own torch, triton and numpy as they are: flashsim's base
requirements are ranges that Colab's versions meet, and ``[colab]`` asks for no torch at all.

Only that one cell is touched: its source, or, where a notebook has none yet, a new cell after the title. The rest
of the file stays byte for byte as it was (a notebook whose JSON is not in the layout JupyterLab and nbformat
write is left alone and reported). The README's badges, between ``<!-- badges -->`` and ``<!-- /badges -->``,
follow from the same repository URL; with none set there are none.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TAG = "flashsim-colab-setup"
CELL_ID = TAG
FIRST_NOTEBOOK = "00_start_here.ipynb"

CELL = '''\
# On Colab: install flashsim and its widgets, keeping Colab's own torch, triton and numpy. Elsewhere: nothing.
import importlib.util, os, subprocess, sys
FLASHSIM_REPOSITORY = {repository!r}  # [project.urls] Repository (tools/sync_notebook_header.py writes it)
if "google.colab" in sys.modules and importlib.util.find_spec("flashsim") is None:
    _source = os.environ.get("FLASHSIM_SOURCE") or (FLASHSIM_REPOSITORY and "git+" + FLASHSIM_REPOSITORY)
    if not _source:
        print("flashsim has no public repository yet: upload a wheel and set FLASHSIM_SOURCE to its file:// URL")
    else:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "flashsim[colab] @ " + _source], check=True)
        importlib.invalidate_caches()'''


def repository(root: Path = ROOT) -> str | None:
    """The repository URL: [project.urls] Repository in pyproject.toml, or None while there is none."""
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    return project.get("urls", {}).get("Repository")


def cell_source(repo: str | None) -> str:
    return CELL.format(repository=repo)


def badges(repo: str | None) -> str:
    """The README's badge lines for a GitHub repository URL ('' while there is none)."""
    if not repo:
        return ""
    m = re.fullmatch(r"https://github\.com/([^/]+/[^/]+?)(?:\.git)?/?", repo)
    if not m:
        return ""
    slug = m.group(1)
    return (f"[![Binder](https://mybinder.org/badge_logo.svg)](https://mybinder.org/v2/gh/{slug}/HEAD"
            f"?urlpath=lab/tree/notebooks)\n"
            f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
            f"(https://colab.research.google.com/github/{slug}/blob/main/notebooks/{FIRST_NOTEBOOK})\n")


def _dump(nb: dict) -> str:
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def _lines(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    return lines


def sync_notebook(path: Path, source: str, *, write: bool = True) -> str:
    """Bring one notebook's set-up cell to ``source``: 'ok' (already), 'updated', 'inserted' or 'skipped: why'."""
    text = path.read_text(encoding="utf-8")
    nb = json.loads(text)
    if _dump(nb) != text:
        return "skipped: its JSON is not in nbformat's layout (open and save it in JupyterLab, then run again)"
    cells = nb["cells"]
    mine = [i for i, c in enumerate(cells) if TAG in c.get("metadata", {}).get("tags", [])]
    if len(mine) > 1:
        return f"skipped: {len(mine)} cells tagged {TAG}"
    if mine:
        cell = cells[mine[0]]
        if "".join(cell["source"]) == source:
            return "ok"
        cell["source"] = _lines(source)
        status = "updated"
    else:
        new = {"cell_type": "code", "execution_count": None, "metadata": {"tags": [TAG]}, "outputs": [],
               "source": _lines(source)}
        if nb.get("nbformat", 4) > 4 or nb.get("nbformat_minor", 0) >= 5:
            new = {"cell_type": "code", "execution_count": None, "id": CELL_ID, "metadata": {"tags": [TAG]},
                   "outputs": [], "source": _lines(source)}
        at = 1 if cells and cells[0]["cell_type"] == "markdown" else 0
        cells.insert(at, new)
        status = "inserted"
    if write:
        path.write_text(_dump(nb), encoding="utf-8")
    return status


def sync_readme(path: Path, repo: str | None, *, write: bool = True) -> str:
    text = path.read_text(encoding="utf-8")
    m = re.search(r"(<!-- badges -->\n)(.*?)(<!-- /badges -->)", text, flags=re.DOTALL)
    if not m:
        return "skipped: no <!-- badges --> ... <!-- /badges --> markers"
    if m.group(2) == badges(repo):
        return "ok"
    if write:
        path.write_text(text[:m.start(2)] + badges(repo) + text[m.end(2):], encoding="utf-8")
    return "updated"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if anything is out of date")
    ap.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/[0-9][0-9]_*.ipynb")
    args = ap.parse_args(argv)
    repo = repository()
    source = cell_source(repo)
    paths = args.notebooks or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    stale = 0
    for path in paths:
        status = sync_notebook(path, source, write=not args.check)
        stale += status != "ok"
        print(f"{path.name}: {status}")
    if not args.notebooks:
        status = sync_readme(ROOT / "README.md", repo, write=not args.check)
        stale += status != "ok"
        print(f"README.md badges: {status}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
