"""Drive the course's notebooks in a real JupyterLab and Chromium (course plumbing).

One driver for the real-browser test (``tests/course/test_browser.py``) and the latency benchmark
(``benchmarks/dashboard_latency.py``): start JupyterLab on localhost over a copy of the notebooks, open a chapter in
Debian's Chromium through Playwright, run all its cells, and find a dashboard's plot and read its pixels.

- :func:`copy_notebooks` copies chapters to a temporary folder (JupyterLab's autosave never touches the repository);
- :func:`start_lab` / :func:`stop_lab` / :func:`shutdown_kernels`: the server, with the course's JupyterLab settings
  (``notebooks/.jupyter``: no news pop-up) and the kernel importing flashsim from this checkout;
- :func:`launch_chromium`: a persistent Chromium context in its own profile folder;
- :func:`open_notebook` and :func:`run_all`: open a chapter, run every cell, report the cells' errors;
- :data:`PLOT_JS`: page helpers ``__flashsimPlot(area)`` (the largest plot of an output area: an ipympl canvas or
  an ``<img>``) and ``__flashsimSig(el)`` (a hash of its pixels) and ``__flashsimSlider(label)`` (the first slider
  with that label and its output area's index).

Playwright is a test extra; nothing here imports it (the caller passes ``playwright.sync_api``'s objects).
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "ROOT", "PLOT_JS", "copy_notebooks", "start_lab", "stop_lab",
           "shutdown_kernels", "launch_chromium", "open_notebook", "run_all", "settled_screenshot",
           "why_not_runnable"]

#: the checkout this module lives in (its notebooks/ and the package the kernel imports)
ROOT = Path(__file__).resolve().parents[3]
CHROMIUM = os.environ.get("FLASHSIM_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]
VIEWPORT = {"width": 1400, "height": 1000}

# --- page-side JavaScript ---------------------------------------------------------------------------------------
#: installs window.__flashsimPlot, __flashsimSig and __flashsimSlider (evaluate it once per page load)
PLOT_JS = """() => {
  window.__flashsimPlot = (area) => {
    let best = null, bestArea = -1;
    for (const el of area.querySelectorAll('.jupyter-matplotlib-canvas-div canvas, img, svg:not(.widget-slider svg)')) {
      if (el.closest('.widget-slider')) continue;
      const r = el.getBoundingClientRect();
      if (r.width * r.height > bestArea) { best = el; bestArea = r.width * r.height; }
    }
    return best;
  };
  window.__flashsimSig = (el) => {
    if (!el) return 0;
    let h = 0;
    if (el.tagName === 'IMG' || el.tagName === 'svg') {
      const s = el.tagName === 'IMG' ? (el.getAttribute('src') || '') : el.outerHTML;
      h = s.length;
      for (let i = 0; i < s.length; i += 97) h = (h * 31 + s.charCodeAt(i)) | 0;
      return h;
    }
    const d = el.getContext('2d').getImageData(0, 0, el.width, el.height).data;
    for (let i = 0; i < d.length; i += 8) h = (h * 31 + d[i] + 7 * d[i + 1] + 13 * d[i + 2]) | 0;
    return h;
  };
  window.__flashsimSlider = (label) => {
    const all = Array.from(document.querySelectorAll('.widget-slider'));
    const s = all.find(s => { const l = s.querySelector('.widget-label');
                              return l && l.textContent.trim() === label; });
    if (!s) return null;
    const areas = Array.from(document.querySelectorAll('.jp-Cell-outputArea'));
    const readout = s.querySelector('.widget-readout');
    return {index: all.indexOf(s), area: areas.indexOf(s.closest('.jp-Cell-outputArea')),
            value: readout ? readout.textContent.trim() : null};
  };
}"""

_KERNEL_IDLE = ("() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget; "
                "const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel; "
                "return !!k && k.status === 'idle'; }")

_RUN_ALL = "async () => { await window.jupyterapp.commands.execute('notebook:run-all-cells'); }"

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
  const running = Array.from(document.querySelectorAll('.jp-Notebook .jp-InputPrompt'))
      .some(p => p.textContent.includes('*'));
  return {ready: true, kernel: kernel ? kernel.status : null, cells, running};
}"""


def why_not_runnable() -> str | None:
    """None when Chromium and Playwright are there, else what to install."""
    if not Path(CHROMIUM).exists():
        return (f"chromium not found at {CHROMIUM}: install Debian's chromium (apt-get install -y chromium; "
                ".ci/run does this) to run the real-browser checks")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright pip package is not installed (pip install -e '.[test]')"
    return None


def copy_notebooks(folder: Path, prefixes=None, paths=None) -> list[Path]:
    """Copy the chapters whose names start with `prefixes` (or the notebooks `paths`) into `folder`; their copies."""
    folder = Path(folder)
    sources = [Path(p) for p in paths or ()]
    for prefix in prefixes or ():
        sources += sorted((ROOT / "notebooks").glob(f"{prefix}_*.ipynb"))
    out = []
    for nb in sources:
        shutil.copy(nb, folder / nb.name)
        out.append(folder / nb.name)
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_lab(folder: Path, size: str, log: Path, env: dict | None = None, timeout_s: float = 90.0):
    """JupyterLab serving `folder` on 127.0.0.1 (a free port, a random token; kernels at FLASHSIM_SIZE=`size`,
    importing flashsim from this checkout, ``env`` added): (process, base url, token)."""
    folder = Path(folder)
    port, token = _free_port(), uuid.uuid4().hex
    runtime = folder / ".jupyter-runtime"
    runtime.mkdir(exist_ok=True)
    pythonpath = os.pathsep.join([str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    full_env = dict(os.environ, FLASHSIM_SIZE=size, JUPYTER_RUNTIME_DIR=str(runtime), PYTHONUNBUFFERED="1",
                    PYTHONPATH=pythonpath, JUPYTER_CONFIG_PATH=str(ROOT / "notebooks" / ".jupyter"),
                    MPLBACKEND="module://matplotlib_inline.backend_inline", **(env or {}))
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
           f"--ServerApp.root_dir={folder}", "--LabApp.expose_app_in_browser=True",
           "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
           "--LabApp.extension_manager=readonly", "--allow-root"]
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=full_env, cwd=str(folder),
                                start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"JupyterLab exited ({proc.returncode}):\n{Path(log).read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2) as r:
                if r.status == 200:
                    return proc, base, token
        except OSError:
            time.sleep(0.3)
    stop_lab(proc)
    raise RuntimeError(f"JupyterLab did not answer within {timeout_s:.0f} s:\n{Path(log).read_text()[-3000:]}")


def shutdown_kernels(base: str, token: str) -> None:
    """Shut down every kernel of the server (one chapter's kernel must not compete with the next one's)."""
    with urllib.request.urlopen(f"{base}/api/kernels?token={token}", timeout=10) as r:
        kernels = json.loads(r.read())
    for k in kernels:
        req = urllib.request.Request(f"{base}/api/kernels/{k['id']}?token={token}", method="DELETE")
        urllib.request.urlopen(req, timeout=30).close()


def stop_lab(proc) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)


def launch_chromium(playwright, profile: Path):
    """A persistent headless Chromium context (Debian's chromium, `profile` as its --user-data-dir) and its page."""
    browser = playwright.chromium.launch_persistent_context(str(profile), executable_path=CHROMIUM, headless=True,
                                                            args=CHROMIUM_ARGS, viewport=VIEWPORT)
    page = browser.pages[0] if browser.pages else browser.new_page()
    return browser, page


def open_notebook(page, base: str, token: str, name: str, timeout_s: float = 90.0) -> None:
    """Open notebook `name` of the server (a fresh workspace) and wait until its kernel is idle."""
    page.goto(f"{base}/lab/tree/{name}?reset&token={token}", wait_until="domcontentloaded",
              timeout=timeout_s * 1000)
    page.wait_for_function(_KERNEL_IDLE, timeout=timeout_s * 1000)


def run_all(page, budget_s: float) -> dict:
    """Run every cell (``notebook:run-all-cells``) and wait until all ran and the kernel is idle, a cell raised, or
    `budget_s` passed: {"run_all_s", "errors" (the cells' "ename: evalue"), "finished", "state"}."""
    t0 = time.monotonic()
    page.evaluate(_RUN_ALL)
    state = None
    while time.monotonic() - t0 < budget_s:
        state = page.evaluate(_STATE)
        if state["ready"] and any(c["errors"] for c in state["cells"]):
            break
        if (state["ready"] and state["kernel"] == "idle" and not state["running"]
                and all(c["count"] is not None for c in state["cells"])):
            break
        time.sleep(0.5)
    errors = [e for c in (state or {}).get("cells", []) for e in c["errors"]]
    done = bool(state and state.get("ready") and all(c["count"] is not None for c in state["cells"]))
    return {"run_all_s": round(time.monotonic() - t0, 1), "errors": errors, "finished": done, "state": state}


def settled_screenshot(page, locate, timeout_s: float = 60.0, differ_from: bytes | None = None,
                       poll_s: float = 0.3) -> tuple[bytes, bool]:
    """A PNG screenshot of the element ``locate()`` returns once what it shows has settled: the kernel is idle and
    three screenshots ``poll_s`` apart are equal (and, with ``differ_from``, differ from those bytes).

    Why: a slider's value changes in the browser at once, but the kernel redraws the figure and ipympl sends the
    pixels later; on a loaded 2-core machine that took over the half second a fixed wait allowed, and a test
    compared two screenshots of the same frame. Polling what a person would see waits as long
    as it takes and no longer. ``locate`` is called anew at every poll (the element may be replaced).
    Returns (the last screenshot, whether it settled within `timeout_s`)."""
    deadline = time.monotonic() + timeout_s
    last, same = None, 0
    while True:
        idle = page.evaluate(_KERNEL_IDLE)
        shot = locate().screenshot()
        same = same + 1 if (idle and shot == last) else 0
        last = shot
        if same >= 2 and (differ_from is None or shot != differ_from):
            return shot, True
        if time.monotonic() > deadline:
            return shot, False
        page.wait_for_timeout(poll_s * 1000)
