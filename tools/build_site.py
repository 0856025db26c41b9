"""Build the course website: `make site` runs `python tools/build_site.py _build/site`.

Every notebook in notebooks/ is executed at small size (FLASHSIM_SIZE=small) by MyST-NB and rendered with its
figures by Sphinx (configuration: site/conf.py). A cell that raises fails the build. Executed notebooks are cached
in _build/.jupyter_cache, keyed by their code cells, so a second build re-executes only the notebooks whose code
changed (delete that folder after changing flashsim's own code). Writes OUTDIR/index.html, which
forwards to the course's first page.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
START = "site/index.html"


def build(outdir: Path, *, cache: Path | None = None) -> Path:
    """Build the site into ``outdir`` (executed notebooks cached in ``cache``, default _build/.jupyter_cache);
    return the path of its front page."""
    outdir = Path(outdir).resolve()
    env = dict(os.environ, FLASHSIM_SIZE="small", MPLBACKEND="module://matplotlib_inline.backend_inline")
    if cache is not None:
        env["FLASHSIM_SITE_CACHE"] = str(Path(cache).resolve())
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-c", str(ROOT / "site"),
           "-d", str(outdir.parent / (outdir.name + ".doctrees")), str(ROOT), str(outdir)]
    subprocess.run(cmd, check=True, cwd=ROOT, env=env)
    front = outdir / "index.html"
    front.write_text(f'<!doctype html><meta charset="utf-8"><title>flashsim</title>'
                     f'<meta http-equiv="refresh" content="0; url={START}"><a href="{START}">flashsim</a>\n')
    return front


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "_build/site")
    print(f"site: {build(out)}")
