"""`make site` builds the course website (tools/build_site.py: Sphinx + MyST-NB, every notebook executed at small
size), and a real browser opens it with the network off, as a reader behind a firewall would:

- every chapter is a page; the site fits its size budget (tools/build_site.py's SITE_BUDGET_BYTES);
- every dashboard a notebook shows is on its page, pre-rendered (flashsim.course.kit.static_page), with a slider
  over more than one state (a progress bar's widget view stays blank: it loads nothing);
- no page, script or stylesheet names another host;
- in Chromium: a chapter page has its title, figures that loaded and no error output; on chapters 03, 05 and 08
  the dashboard's image is there, moving its slider changes the image and the readout, chapter 08's Play steps
  the frames; the formulas are typeset (MathJax from the site itself); no request leaves the site.

Chromium is Debian's (/usr/bin/chromium; .ci/run installs it), driven by the playwright pip package with
``executable_path``, as tests/course/test_browser.py does; the site is served from 127.0.0.1 on a free port, and
any request for another address is refused and recorded.
"""
from __future__ import annotations

import functools
import hashlib
import http.server
import json
import os
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from packaging_helpers import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import build_site

pytestmark = [pytest.mark.packaging, pytest.mark.slow, pytest.mark.xdist_group("site"), pytest.mark.browser]

CHROMIUM = os.environ.get("FLASHSIM_CHROMIUM", "/usr/bin/chromium")
CHAPTER = "05_flash_forward"
TITLE = "05 · FlashAttention forward"
# the dashboards whose slider the browser moves: (chapter page, dashboard class)
MOVED = [("03_tiling", "TilingDashboard"), ("05_flash_forward", "TrafficDashboard"),
         ("08_causal", "CausalTileAnimator")]
PLAYED = ("08_causal", "CausalTileAnimator")
# no network but loopback here: Chromium's own background traffic off (the machine refuses it), and every host
# name but the loopback address resolves to nothing
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
        "--disable-background-networking", "--disable-component-update", "--disable-dev-shm-usage",
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"]

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

_DASHBOARD = """([name, k]) => {
  const root = document.querySelectorAll(`.flashsim-static[data-dashboard="${name}"]`)[k];
  if (!root) return null;
  const img = root.querySelector('img.flashsim-static-figure');
  const slider = root.querySelector('input[type=range]');
  return {image: img && img.complete && img.naturalWidth > 0 ? img.src : null,
          readout: root.querySelector('.flashsim-static-readout').textContent,
          value: slider.value, max: slider.max, shown: slider.nextElementSibling.textContent};
}"""

_MATH = """() => ({
  typeset: document.querySelectorAll('mjx-container').length,
  raw: Array.from(document.querySelectorAll('span.math, div.math'))
      .filter(e => !e.querySelector('mjx-container')).map(e => e.textContent.slice(0, 80)),
})"""

_EXTERNAL = re.compile(r"""(?:src|href|action)\s*=\s*["']?\s*(?:https?:)?//(?!127\.0\.0\.1)""", re.I)
_CSS_EXTERNAL = re.compile(r"""(?:url\(\s*["']?|@import\s+["'])(?:https?:)?//""", re.I)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The website built by tools/build_site.py (what `make site` runs), with a cache of its own."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"chromium not found at {CHROMIUM}: apt-get install -y chromium (.ci/run does this)")
    pytest.importorskip("myst_nb", reason="the [site] extra is not installed (make venv installs the lock)")
    out = tmp_path_factory.mktemp("site")
    t0 = time.perf_counter()
    build_site.build(out / "html", cache=out / "cache")
    print(f"site test: built in {time.perf_counter() - t0:.0f} s, {build_site.site_bytes(out / 'html') / 1e6:.1f} MB")
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


def shown_dashboards(notebook: Path) -> list[str]:
    """The variables whose ``.show()`` ends a code cell of `notebook` (what puts a dashboard on the page)."""
    cells = json.loads(notebook.read_text())["cells"]
    shown = []
    for cell in cells:
        lines = [ln for ln in "".join(cell["source"]).splitlines() if ln.strip()] if cell["cell_type"] == "code" else []
        m = re.fullmatch(r"(\w+)\.show\(\)\s*(#.*)?", lines[-1].strip()) if lines else None
        if m:
            shown.append(m.group(1))
    return shown


def test_every_chapter_is_a_page(site):
    chapters = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert chapters and [p.stem for p in sorted((site / "notebooks").glob("*.html"))] == chapters
    index = (site / "site" / "index.html").read_text()
    assert all(f"notebooks/{c}.html" in index for c in chapters), "the front page lists every chapter"
    assert 'url=site/index.html' in (site / "index.html").read_text()


def test_the_site_fits_its_budget(site):
    size = build_site.site_bytes(site)
    pages = sorted(((p.stat().st_size, p.name) for p in (site / "notebooks").glob("*.html")), reverse=True)
    mathjax = build_site.site_bytes(site / "_static" / "mathjax")
    print(f"site test: {size / 1e6:.1f} MB in all (budget {build_site.SITE_BUDGET_BYTES / 1e6:.0f} MB), MathJax "
          f"{mathjax / 1e6:.1f} MB, largest pages {[(n, round(s / 1e6, 1)) for s, n in pages[:3]]}")
    assert size < build_site.SITE_BUDGET_BYTES


def test_every_dashboard_is_on_its_page_with_working_controls(site):
    expected = working = 0
    for notebook in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        page = (site / "notebooks" / f"{notebook.stem}.html").read_text()
        fragments = re.findall(r'<div class="flashsim-static" data-dashboard="(\w+)">(.*?)</script></div>', page,
                               re.S)
        shown = shown_dashboards(notebook)
        assert len(fragments) == len(shown), \
            f"{notebook.stem}: {len(shown)} dashboards shown, {len(fragments)} on the page"
        for name, body in fragments:
            data = json.loads(re.search(r'class="flashsim-static-data">(.*?)</script>', body, re.S).group(1))
            assert 'class="flashsim-static-figure' in body, f"{notebook.stem}: {name} has no figure"
            assert body.count('type="range"') == len(data["labels"]) >= 1
            working += len(data["frames"]) > 1 and len(set(map(tuple, data["frames"].values()))) > 1
        expected += len(shown)
    print(f"site test: {working} of {expected} dashboards on the site have working controls")
    assert working == expected


def test_nothing_is_loaded_from_another_host(site):
    offenders = []
    for path in site.rglob("*"):
        if path.suffix == ".html":
            text = path.read_text(errors="replace")
            tags = re.findall(r"<(?:script|link|img|iframe|source|video|audio)\b[^>]*>", text, re.I)
            offenders += [(path.relative_to(site), t[:120]) for t in tags if _EXTERNAL.search(t)]
        elif path.suffix == ".css":
            offenders += [(path.relative_to(site), m) for m in _CSS_EXTERNAL.findall(path.read_text(errors="replace"))]
    assert not offenders, f"pages that load from another host: {offenders[:10]}"
    assert (site / "_static" / "mathjax" / "tex-mml-chtml.js").is_file()


def _image_id(src: str | None) -> str | None:
    return hashlib.sha1(src.encode()).hexdigest()[:10] if src else None


def test_chapter_pages_in_a_browser_with_the_network_off(served, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright pip package is not installed")
    profile = tempfile.mkdtemp(prefix="flashsim-site-chromium-", dir=tmp_path)
    left: list[str] = []            # requests for anything but the site

    def only_the_site(route):
        if route.request.url.startswith(served + "/"):
            route.continue_()
        else:
            left.append(route.request.url)
            route.abort()

    moved, played, maths = {}, None, {}
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True, args=ARGS,
                                                        viewport={"width": 1280, "height": 900})
        try:
            browser.route("**/*", only_the_site)
            page = browser.pages[0] if browser.pages else browser.new_page()
            page.goto(f"{served}/index.html", wait_until="load", timeout=60_000)  # the front page forwards
            page.wait_for_url("**/site/index.html", timeout=30_000)
            page.goto(f"{served}/notebooks/{CHAPTER}.html", wait_until="load", timeout=60_000)
            state = page.evaluate(_PAGE_STATE)
            page.screenshot(path=str(tmp_path / f"{CHAPTER}.png"))
            for chapter, name in MOVED:
                page.goto(f"{served}/notebooks/{chapter}.html", wait_until="load", timeout=60_000)
                page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                                       timeout=30_000)
                page.evaluate("() => MathJax.startup.promise")
                maths[chapter] = page.evaluate(_MATH)
                before = page.evaluate(_DASHBOARD, [name, 0])
                slider = page.locator(f'.flashsim-static[data-dashboard="{name}"] input[type=range]').first
                slider.scroll_into_view_if_needed()
                slider.focus()
                page.keyboard.press("End" if before and before["value"] != before["max"] else "Home")
                after = page.evaluate(_DASHBOARD, [name, 0])
                slider.screenshot(path=str(tmp_path / f"{chapter}-{name}-slider.png"))
                moved[chapter, name] = (before, after)
                if (chapter, name) == PLAYED:
                    page.keyboard.press("Home")
                    start = page.evaluate(_DASHBOARD, [name, 0])
                    page.locator(f'.flashsim-static[data-dashboard="{name}"] button.flashsim-static-play').first.click()
                    page.wait_for_function(f"() => ({_DASHBOARD})(['{name}', 0]).value >= 2", timeout=20_000)
                    played = (start, page.evaluate(_DASHBOARD, [name, 0]))
        finally:
            browser.close()
    print(f"site test: screenshot {tmp_path / f'{CHAPTER}.png'}; {state['cells']} outputs, "
          f"figures {state['figures']}; MathJax {({c: m['typeset'] for c, m in maths.items()})}")
    assert TITLE in state["title"] and TITLE in state["h1"]
    assert state["figures"], "no figure (<img> in a cell output) loaded on the chapter page"
    assert not state["errors"] and not state["tracebacks"], f"error output on the page: {state['errors']}"
    # stderr that is an error (a logged exception) fails; a warning is shown on the page and named here
    failed = [e for e in state["stderr"] if re.search(r"Traceback|Error\b|Exception\b", e)
              and not re.search(r"\w+Warning\b", e)]
    assert not failed, f"error output on stderr on the page: {failed}"
    if state["stderr"]:
        print(f"site test: warnings shown on the {CHAPTER} page: {state['stderr']}")
    for (chapter, name), (before, after) in moved.items():
        assert before and before["image"], f"{chapter}: {name}'s image is not on the page"
        assert after["value"] != before["value"] and after["shown"] != before["shown"], \
            f"{chapter}: the slider did not move"
        assert _image_id(after["image"]) != _image_id(before["image"]), f"{chapter}: {name}'s image did not change"
        assert after["readout"] != before["readout"], f"{chapter}: {name}'s readout did not change"
    start, later = played
    assert int(later["value"]) >= 2 and _image_id(later["image"]) != _image_id(start["image"]), "Play did not step"
    for chapter, math in maths.items():
        assert math["typeset"] > 0 and not math["raw"], f"{chapter}: formulas not typeset: {math['raw'][:3]}"
    assert not left, f"requests that left the site: {left[:10]}"
