"""Real-browser test: chapter 05 in JupyterLab, driven by Debian's chromium through Playwright (the course issue).

What it does, in under three minutes on a 2-core CI machine:

1. starts JupyterLab on 127.0.0.1 (a free port, a random token, ``FLASHSIM_SIZE=small``) serving ``notebooks/``;
2. opens ``05_flash_forward.ipynb`` in chromium (``/usr/bin/chromium``, headless, its own temporary profile) and
   runs every cell through JupyterLab's ``notebook:run-all-cells`` command, then checks no cell raised;
3. finds the slider labelled ``block_c``, moves it one step with the keyboard, and asserts that the plot in the
   same output area changes (the ``<img>``/``<svg>`` content or an ipympl ``<canvas>``'s pixels differ);
4. asserts the browser console logged no errors (``console.error`` and uncaught page errors);
5. saves screenshots of the output area before and after, and of the whole page, under pytest's ``tmp_path``
   and prints their paths.

It skips, saying why, when chromium or Playwright is missing (``.ci/run`` installs Debian's ``chromium``; the
``playwright`` pip package comes with the test extras; ``playwright install`` is never needed because we launch
the system chromium by path). ``FLASHSIM_BROWSER_NOTEBOOK=/path/to/nb.ipynb`` points it at another notebook
(used to develop the test before chapter 05 existed).
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("FLASHSIM_CHROMIUM", "/usr/bin/chromium")
NOTEBOOK = Path(os.environ.get("FLASHSIM_BROWSER_NOTEBOOK", ROOT / "notebooks" / "05_flash_forward.ipynb"))
SLIDER_LABEL = "block_c"
BUDGET_S = 170  # the whole test must stay under 3 minutes
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]

pytestmark = pytest.mark.browser


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, proc: subprocess.Popen, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"JupyterLab exited with code {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"JupyterLab did not answer {url} within {timeout:.0f} s:\n{log.read_text()[-3000:]}")


def _skip_unless_runnable():
    """Skip, saying why, without chromium, Playwright or the notebook; else return playwright.sync_api."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"chromium not found at {CHROMIUM}: install Debian's chromium (apt-get install -y chromium; "
                    ".ci/run does this) to run the real-browser test")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright pip package is not installed "
                                   "(pip install -e '.[test]')")
    if not NOTEBOOK.exists():
        pytest.skip(f"{NOTEBOOK} does not exist yet")
    return sync_api


@pytest.fixture
def jupyterlab(tmp_path):
    """A JupyterLab server for NOTEBOOK's folder: yields (base_url, token); stops it afterwards."""
    _skip_unless_runnable()
    port, token = _free_port(), uuid.uuid4().hex
    runtime = tmp_path / "jupyter-runtime"
    runtime.mkdir()
    # the kernel imports flashsim from this checkout even where it is not pip-installed
    pythonpath = os.pathsep.join([str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    env = dict(os.environ, FLASHSIM_SIZE="small", JUPYTER_RUNTIME_DIR=str(runtime), PYTHONUNBUFFERED="1",
               PYTHONPATH=pythonpath,
               MPLBACKEND="module://matplotlib_inline.backend_inline")
    # no GPU in CI: the kernels module would pick the interpreter anyway; say so up front
    env.setdefault("TRITON_INTERPRET", "1")
    log = tmp_path / "jupyterlab.log"
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
           "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
           f"--ServerApp.root_dir={NOTEBOOK.parent}", "--LabApp.expose_app_in_browser=True",
           "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
           "--LabApp.extension_manager=readonly", "--ServerApp.open_browser=False", "--allow-root"]
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=str(NOTEBOOK.parent),
                                start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_http(f"{base}/api/status?token={token}", proc, log, timeout=60)
        yield base, token
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


_RUN_ALL = """async () => {
  const app = window.jupyterapp;
  await app.commands.execute('notebook:run-all-cells');
}"""

_STATE = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  if (!w || !w.content || !w.sessionContext) return {ready: false};
  const kernel = w.sessionContext.session && w.sessionContext.session.kernel;
  const cells = [];
  const model = w.content.model;
  for (let i = 0; i < model.cells.length; i++) {
    const c = model.cells.get(i);
    if (c.type !== 'code') continue;
    const outs = c.outputs.toJSON();
    cells.push({count: c.executionCount, errors: outs.filter(o => o.output_type === 'error')
                 .map(o => o.ename + ': ' + o.evalue)});
  }
  const running = document.querySelectorAll('.jp-Notebook .jp-InputPrompt').length
      ? Array.from(document.querySelectorAll('.jp-Notebook .jp-InputPrompt')).some(p => p.textContent.includes('*'))
      : false;
  return {ready: true, kernel: kernel ? kernel.status : null, cells, running};
}"""

# the output area holding the slider labelled SLIDER_LABEL, and a signature of the plots in it
_PLOT_SIGNATURE = """(label) => {
  const sliders = Array.from(document.querySelectorAll('.widget-slider'))
      .filter(s => { const l = s.querySelector('.widget-label'); return l && l.textContent.trim() === label; });
  if (!sliders.length) return null;
  const area = sliders[0].closest('.jp-Cell-outputArea') || sliders[0].closest('.jp-OutputArea');
  const imgs = Array.from(area.querySelectorAll('img')).map(i => i.getAttribute('src') || '');
  const svgs = Array.from(area.querySelectorAll('svg')).filter(s => !s.closest('.widget-slider'))
      .map(s => s.outerHTML);
  // an ipympl figure draws into <canvas> elements: their pixels, as data URLs
  const canvases = Array.from(area.querySelectorAll('canvas')).filter(c => c.width > 50 && c.height > 50)
      .map(c => { try { return c.toDataURL(); } catch (e) { return ''; } });
  const readout = sliders[0].querySelector('.widget-readout');
  return {plots: imgs.concat(svgs, canvases), value: readout ? readout.textContent.trim() : null,
          index: Array.from(document.querySelectorAll('.jp-Cell-outputArea')).indexOf(area)};
}"""


def _largest_plot(area):
    """The biggest <img>/<svg>/<canvas> (outside sliders) in an output area: the traffic plot."""
    best, best_area = None, -1.0
    for loc in (area.locator("img"), area.locator("svg:not(.widget-slider svg)"), area.locator("canvas")):
        for i in range(loc.count()):
            box = loc.nth(i).bounding_box()
            if box and box["width"] * box["height"] > best_area:
                best, best_area = loc.nth(i), box["width"] * box["height"]
    assert best is not None, "no plot in the output area"
    return best


def test_chapter05_slider_moves_plot(jupyterlab, tmp_path):
    sync_api = _skip_unless_runnable()
    t0 = time.monotonic()
    base, token = jupyterlab
    url = f"{base}/lab/tree/{NOTEBOOK.name}?reset&token={token}"
    errors: list[str] = []
    profile = tempfile.mkdtemp(prefix="flashsim-chromium-")
    try:
        with sync_api.sync_playwright() as pw:
            # the temporary profile is Chromium's --user-data-dir (Playwright passes it for a persistent context)
            browser = pw.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True,
                                                            args=CHROMIUM_ARGS,
                                                            viewport={"width": 1400, "height": 1000})
            page = browser.pages[0] if browser.pages else browser.new_page()
            page.on("console", lambda m: errors.append(f"console.{m.type}: {m.text} @ {m.location}")
                    if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
            page.goto(url, wait_until="domcontentloaded", timeout=60_000)
            page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget "
                                   "&& window.jupyterapp.shell.currentWidget.sessionContext "
                                   "&& window.jupyterapp.shell.currentWidget.sessionContext.session "
                                   "&& window.jupyterapp.shell.currentWidget.sessionContext.session.kernel "
                                   "&& window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status "
                                   "=== 'idle'", timeout=60_000)
            page.evaluate(_RUN_ALL)
            # wait until every code cell ran and the kernel is idle again
            state = None
            while time.monotonic() - t0 < BUDGET_S - 30:
                state = page.evaluate(_STATE)
                done = (state["ready"] and state["kernel"] == "idle" and not state["running"]
                        and all(c["count"] is not None for c in state["cells"]))
                if done or any(c["errors"] for c in state.get("cells", [])):
                    break
                time.sleep(0.5)
            cell_errors = [e for c in (state or {}).get("cells", []) for e in c["errors"]]
            assert not cell_errors, f"cells raised in the browser: {cell_errors}"
            assert state and all(c["count"] is not None for c in state["cells"]), (
                f"the notebook did not finish within the time budget: {state}")
            print(f"browser test: notebook ran in {time.monotonic() - t0:.1f} s")

            slider = page.locator(".widget-slider", has=page.locator(".widget-label", has_text=SLIDER_LABEL)).first
            slider.wait_for(state="visible", timeout=30_000)
            slider.scroll_into_view_if_needed()
            before = page.evaluate(_PLOT_SIGNATURE, SLIDER_LABEL)
            assert before is not None, f"no slider labelled {SLIDER_LABEL!r} on the page"
            assert before["plots"], f"no plot (<img>, <svg> or <canvas>) next to the {SLIDER_LABEL!r} slider"
            area = page.locator(".jp-Cell-outputArea").nth(before["index"])
            plot = _largest_plot(area)
            shot_before, plot_before = tmp_path / "ch05_before.png", tmp_path / "ch05_plot_before.png"
            area.screenshot(path=str(shot_before))
            plot.screenshot(path=str(plot_before))

            handle = slider.locator(".noUi-handle").first
            handle.focus()
            page.keyboard.press("ArrowRight")
            try:
                page.wait_for_function(f"() => {{ const s = ({_PLOT_SIGNATURE})({json.dumps(SLIDER_LABEL)}); "
                                       f"return s && JSON.stringify(s.plots) !== {json.dumps(json.dumps(before['plots']))}; }}",
                                       timeout=60_000)
            except sync_api.TimeoutError:
                pass
            page.wait_for_timeout(500)  # let the redraw settle before the screenshots
            after = page.evaluate(_PLOT_SIGNATURE, SLIDER_LABEL)
            shot_after, plot_after = tmp_path / "ch05_after.png", tmp_path / "ch05_plot_after.png"
            area.screenshot(path=str(shot_after))
            _largest_plot(area).screenshot(path=str(plot_after))
            shot_page = tmp_path / "ch05_page.png"
            page.screenshot(path=str(shot_page), full_page=False)
            print(f"browser test: screenshots in {tmp_path}: {shot_before.name}, {shot_after.name}, "
                  f"{plot_before.name}, {plot_after.name}, {shot_page.name}")
            print(f"browser test: slider {SLIDER_LABEL} {before['value']} -> {after['value']}")
            assert after["value"] != before["value"], f"the {SLIDER_LABEL} slider did not move ({before['value']})"
            assert after["plots"] != before["plots"], "moving the slider did not redraw the plot"
            assert plot_before.read_bytes() != plot_after.read_bytes(), (
                f"the plot looks the same before and after moving the slider: {plot_before}, {plot_after}")
            browser.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    assert not errors, "the browser console logged errors:\n" + "\n".join(errors)
    elapsed = time.monotonic() - t0
    print(f"browser test: {elapsed:.1f} s")
    assert elapsed < BUDGET_S, f"the browser test took {elapsed:.0f} s (budget {BUDGET_S} s)"
