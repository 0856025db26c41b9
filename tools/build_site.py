"""Build the course website: `make site` runs `python tools/build_site.py _build/site`.

Every notebook in notebooks/ is executed at small size (FLASHSIM_SIZE=small) by MyST-NB and rendered with its
figures by Sphinx (configuration: site/conf.py). A cell that raises fails the build. The dashboards are rendered
for a page with no kernel (FLASHSIM_STATIC_DASHBOARDS=1: flashsim.course.kit.static_page): each one's figure and
readout at every sampled value of its main control, switched by a native slider in the page.

Executed notebooks are cached in _build/.jupyter_cache/<digest of flashsim's code>, keyed by their code cells, so
a second build re-executes only the notebooks whose code changed, and a change to the package re-executes them
all. Writes OUTDIR/index.html, which forwards to the course's first page, and fails if the site outgrows
SITE_BUDGET_BYTES.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
START = "site/index.html"
#: the whole website, MathJax and every dashboard's frames included
SITE_BUDGET_BYTES = 80_000_000


def package_digest() -> str:
    """A digest of flashsim's code and data: the executed notebooks' cache is kept per version of the package
    (MyST-NB keys it by the notebooks' code cells alone)."""
    digest = hashlib.sha1()
    for path in sorted((ROOT / "flashsim").rglob("*")):
        if path.suffix in (".py", ".json", ".md") and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def default_cache() -> Path:
    """_build/.jupyter_cache/<package digest>; the caches of other versions of the package are removed."""
    parent = ROOT / "_build" / ".jupyter_cache"
    cache = parent / package_digest()
    if parent.is_dir():
        for old in parent.iterdir():
            if old != cache:
                shutil.rmtree(old) if old.is_dir() else old.unlink()
    return cache


def site_bytes(outdir: Path) -> int:
    """The bytes of every file of the built site."""
    return sum(p.stat().st_size for p in Path(outdir).rglob("*") if p.is_file())


def build(outdir: Path, *, cache: Path | None = None) -> Path:
    """Build the site into ``outdir`` (executed notebooks cached in ``cache``, default :func:`default_cache`);
    return the path of its front page."""
    outdir = Path(outdir).resolve()
    cache = Path(cache).resolve() if cache is not None else default_cache()
    env = dict(os.environ, FLASHSIM_SIZE="small", MPLBACKEND="module://matplotlib_inline.backend_inline",
               FLASHSIM_STATIC_DASHBOARDS="1", FLASHSIM_SITE_CACHE=str(cache))
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-c", str(ROOT / "site"),
           "-d", str(outdir.parent / (outdir.name + ".doctrees")), str(ROOT), str(outdir)]
    subprocess.run(cmd, check=True, cwd=ROOT, env=env)
    front = outdir / "index.html"
    front.write_text(f'<!doctype html><meta charset="utf-8"><title>flashsim</title>'
                     f'<meta http-equiv="refresh" content="0; url={START}"><a href="{START}">flashsim</a>\n')
    size = site_bytes(outdir)
    if size > SITE_BUDGET_BYTES:
        raise SystemExit(f"site: {size / 1e6:.1f} MB, over its budget of {SITE_BUDGET_BYTES / 1e6:.0f} MB: "
                         f"lower a dashboard's static_samples or its figure's size")
    return front


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "_build/site")
    t0 = time.perf_counter()
    front = build(out)
    print(f"site: {front} ({site_bytes(out) / 1e6:.1f} MB of {SITE_BUDGET_BYTES / 1e6:.0f} MB; "
          f"built in {time.perf_counter() - t0:.0f} s)")
