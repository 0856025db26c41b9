"""Sphinx configuration of the course website (`make site`; tools/build_site.py runs sphinx-build with it).

Sphinx + MyST-NB + sphinx-book-theme, all from PyPI, build offline. Jupyter Book 2 / mystmd, the convention,
was tried first: its HTML build downloads its theme from the internet at build time, which this project's
machines and CI cannot reach (CONTRIBUTING.md, "The website").

The source directory is the repository root, so the notebooks are built where they live (notebooks/, their
working directory as in JupyterLab); only the pages below `include_patterns` are read.

No page loads anything from another host: MathJax is served from the site (`_static/mathjax/`, copied from the
`django-static-mathjax` package, a copy of MathJax 3 packaged for serving; it needs no Django), the widget manager
and RequireJS are never added (the dashboards are pre-rendered: flashsim.course.kit.static_page), and the theme
vendors its own fonts and icons. tests/packaging/test_site.py checks it in Chromium with the network off.
"""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
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
# widget outputs other than the dashboards (a progress bar) stay blank: never fetch a widget manager for them
nb_ipywidgets_js: dict = {}

# MathJax from the site itself: what the page needs of the package's MathJax 3 (the TeX input, its extensions that
# load on demand, the CHTML output's fonts, the menu), not its other bundles or the speech-rule engine
mathjax_path = "mathjax/tex-mml-chtml.js"
MATHJAX_PARTS = ("tex-mml-chtml.js", "input/tex/extensions", "output/chtml/fonts/woff-v2", "ui", "a11y")

html_static_path = ["_static"]
html_css_files = ["flashsim.css"]
html_theme = "sphinx_book_theme"
html_title = "flashsim: FlashAttention on a simulated GPU"
html_theme_options = {
    "show_toc_level": 2,
    "home_page_in_toc": True,
    "use_download_button": True,
}
if _REPOSITORY:  # only once [project.urls] Repository is set: no invented URL
    html_theme_options.update(repository_url=_REPOSITORY, use_repository_button=True)


def mathjax_source() -> Path:
    """MathJax 3's es5 folder inside the installed django-static-mathjax package (the [site] extra)."""
    spec = importlib.util.find_spec("mathjax")
    folder = Path(spec.origin).parent / "static" / "mathjax" / "es5" if spec and spec.origin else None
    if folder is None or not (folder / MATHJAX_PARTS[0]).is_file():
        raise RuntimeError("MathJax is missing: pip install django-static-mathjax (the [site] extra: "
                           "pip install -r requirements/lock.txt)")
    return folder


def copy_mathjax(app, exception) -> None:
    """Put MathJax's parts under the built site's _static/mathjax/ (mathjax_path points there)."""
    if exception is not None or app.builder.format != "html":
        return
    source, target = mathjax_source(), Path(app.outdir) / "_static" / "mathjax"
    for part in MATHJAX_PARTS:
        if (source / part).is_dir():
            shutil.copytree(source / part, target / part, dirs_exist_ok=True)
        else:
            (target / part).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / part, target / part)


def setup(app):
    mathjax_source()                       # fail at the start, not after every notebook ran
    app.connect("build-finished", copy_mathjax)
