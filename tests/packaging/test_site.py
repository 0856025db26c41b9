"""`make site` builds the course website (tools/build_site.py: Sphinx + MyST-NB, every notebook executed at small
size), and a real browser opens a chapter page of it: the chapter's title, a figure that loaded, no error output
(no error or traceback output, no stderr that reports an error; warnings on stderr are printed, not failed).

Chromium is Debian's (/usr/bin/chromium; .ci/run installs it), driven by the playwright pip package with
``executable_path``, as tests/test_browser.py does; the site is served from 127.0.0.1 on a free port.
"""
from __future__ import annotations

import functools
import http.server
import os
import re
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from packaging_helpers import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import build_site

pytestmark = [pytest.mark.packaging, pytest.mark.slow, pytest.mark.xdist_group("site"), pytest.mark.browser]

CHROMIUM = os.environ.get("FLASHSIM_CHROMIUM", "/usr/bin/chromium")
CHAPTER = "05_flash_forward"
TITLE = "05 · FlashAttention forward"
# no network but loopback here: Chromium's own background traffic off (the machine refuses it)
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
        "--disable-background-networking", "--disable-component-update", "--disable-dev-shm-usage"]

_PAGE_STATE = """() => ({
  title: document.title,
  h1: (document.querySelector('main h1') || {}).textContent || '',
  figures: Array.from(document.querySelectorAll('.cell_output img'))
      .filter(i => i.complete && i.naturalWidth > 0).map(i => [i.naturalWidth, i.naturalHeight]),
  errors: Array.from(document.querySelectorAll('.output.error, .output.traceback'))
      .map(e => e.textContent.slice(0, 300)),
  stderr: Array.from(document.querySelectorAll('.output.stderr')).map(e => e.textContent.slice(0, 300)),
  tracebacks: document.body.innerText.includes('Traceback (most recent call last)'),
  cells: document.querySelectorAll('.cell_output').length,
})"""


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The website built by tools/build_site.py (what `make site` runs), with a cache of its own."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"chromium not found at {CHROMIUM}: apt-get install -y chromium (.ci/run does this)")
    pytest.importorskip("myst_nb", reason="the [site] extra is not installed (make venv installs the lock)")
    out = tmp_path_factory.mktemp("site")
    build_site.build(out / "html", cache=out / "cache")
    return out / "html"


@pytest.fixture(scope="module")
def served(site):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    http.server.SimpleHTTPRequestHandler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_every_chapter_is_a_page(site):
    chapters = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert chapters and [p.stem for p in sorted((site / "notebooks").glob("*.html"))] == chapters
    index = (site / "site" / "index.html").read_text()
    assert all(f"notebooks/{c}.html" in index for c in chapters), "the front page lists every chapter"
    assert 'url=site/index.html' in (site / "index.html").read_text()


def test_a_chapter_page_in_a_browser(served, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright pip package is not installed")
    profile = tempfile.mkdtemp(prefix="flashsim-site-chromium-", dir=tmp_path)
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True, args=ARGS,
                                                        viewport={"width": 1280, "height": 900})
        try:
            page = browser.pages[0] if browser.pages else browser.new_page()
            page.goto(f"{served}/index.html", wait_until="load", timeout=60_000)  # the front page forwards
            page.wait_for_url("**/site/index.html", timeout=30_000)
            page.goto(f"{served}/notebooks/{CHAPTER}.html", wait_until="load", timeout=60_000)
            state = page.evaluate(_PAGE_STATE)
            page.screenshot(path=str(tmp_path / f"{CHAPTER}.png"))
        finally:
            browser.close()
    print(f"site test: screenshot {tmp_path / f'{CHAPTER}.png'}; {state['cells']} outputs, "
          f"figures {state['figures']}")
    assert TITLE in state["title"] and TITLE in state["h1"]
    assert state["figures"], "no figure (<img> in a cell output) loaded on the chapter page"
    assert not state["errors"] and not state["tracebacks"], f"error output on the page: {state['errors']}"
    # stderr that is an error (a logged exception) fails; a warning is shown on the page and named here
    failed = [e for e in state["stderr"] if re.search(r"Traceback|Error\b|Exception\b", e)
              and not re.search(r"\w+Warning\b", e)]
    assert not failed, f"error output on stderr on the page: {failed}"
    if state["stderr"]:
        print(f"site test: warnings shown on the {CHAPTER} page: {state['stderr']}")
