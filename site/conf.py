"""Sphinx configuration of the course website (`make site`; tools/build_site.py runs sphinx-build with it).

Sphinx + MyST-NB + sphinx-book-theme, all from PyPI, build offline. Jupyter Book 2 / mystmd, the convention,
was tried first: its HTML build downloads its theme from the internet at build time, which this project's
machines and CI cannot reach (CONTRIBUTING.md, "The website").

The source directory is the repository root, so the notebooks are built where they live (notebooks/, their
working directory as in JupyterLab); only the pages below `include_patterns` are read.
"""
from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
_REPOSITORY = _PROJECT.get("urls", {}).get("Repository")

project = "flashsim"
author = "The flashsim authors"
copyright = "2026, the flashsim authors. Code: MIT; text and figures: CC BY 4.0"
release = version = re.search(r'^__version__ = "([^"]+)"', (ROOT / "flashsim" / "__init__.py").read_text(),
                              re.MULTILINE).group(1)

extensions = ["myst_nb"]
root_doc = "site/index"
include_patterns = ["site/*.md", "notebooks/[0-9][0-9]_*.ipynb"]
exclude_patterns = ["_build", ".venv", "**/.ipynb_checkpoints"]
suppress_warnings = ["mystnb.unknown_mime_type"]

# every notebook executed once (FLASHSIM_SIZE=small is set by tools/build_site.py); the outputs are cached, keyed
# by the notebook's code cells (delete _build/.jupyter_cache after changing the package's code)
nb_execution_mode = "cache"
nb_execution_cache_path = os.environ.get("FLASHSIM_SITE_CACHE") or str(ROOT / "_build" / ".jupyter_cache")
nb_execution_timeout = 900
nb_execution_raise_on_error = True  # a cell that raises fails the build (cells tagged raises-exception may)
nb_execution_show_tb = True
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath"]

html_theme = "sphinx_book_theme"
html_title = "flashsim: FlashAttention on a simulated GPU"
html_theme_options = {
    "show_toc_level": 2,
    "home_page_in_toc": True,
    "use_download_button": True,
}
if _REPOSITORY:  # only once [project.urls] Repository is set: no invented URL
    html_theme_options.update(repository_url=_REPOSITORY, use_repository_button=True)
