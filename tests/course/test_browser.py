"""Real-browser test: chapter 05 in JupyterLab, driven by Debian's chromium through Playwright (the course issue).

What it does, in under three minutes on a 2-core CI machine:

1. starts JupyterLab on 127.0.0.1 (a free port, a random token, ``FLASHSIM_SIZE=small``) serving a copy of the
   notebook (the driver :mod:`flashsim.course.kit.lab_browser`, shared with ``benchmarks/dashboard_latency.py``);
2. opens ``05_flash_forward.ipynb`` in chromium (``/usr/bin/chromium``, headless, its own temporary profile) and
   runs every cell through JupyterLab's ``notebook:run-all-cells`` command, then checks no cell raised;
3. finds the slider labelled ``block_c``, waits until its plot shows one settled frame, moves the slider one step
   with the keyboard, waits (polling screenshots, :func:`~flashsim.course.kit.lab_browser.settled_screenshot`)
   until the kernel's new frame is on the screen, and asserts that the plot in the same output area changed (the
   ``<img>``/``<svg>`` content or an ipympl ``<canvas>``'s pixels, and the screenshot itself);
4. asserts the browser console logged no errors (``console.error`` and uncaught page errors);
5. saves screenshots of the output area before and after, and of the whole page, under pytest's ``tmp_path``
   and prints their paths.

It skips, saying why, when chromium or Playwright is missing (``.ci/run`` installs Debian's ``chromium``; the
``playwright`` pip package comes with the test extras; ``playwright install`` is never needed because we launch
the system chromium by path). ``FLASHSIM_BROWSER_NOTEBOOK=/path/to/nb.ipynb`` points it at another notebook
(used to develop the test before chapter 05 existed).
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from flashsim.course.kit import lab_browser as lab

NOTEBOOK = Path(os.environ.get("FLASHSIM_BROWSER_NOTEBOOK", lab.ROOT / "notebooks" / "05_flash_forward.ipynb"))
SLIDER_LABEL = "block_c"
BUDGET_S = 170  # the whole test must stay under 3 minutes

pytestmark = pytest.mark.browser


def _skip_unless_runnable():
    """Skip, saying why, without chromium, Playwright or the notebook; else return playwright.sync_api."""
    why = lab.why_not_runnable()
    if why:
        pytest.skip(why)
    if not NOTEBOOK.exists():
        pytest.skip(f"{NOTEBOOK} does not exist yet")
    import playwright.sync_api as sync_api
    return sync_api


@pytest.fixture
def jupyterlab(tmp_path):
    """A JupyterLab server over a copy of NOTEBOOK (autosave never touches the repository): yields (base_url,
    token); stops it afterwards."""
    _skip_unless_runnable()
    folder = tmp_path / "notebooks"
    folder.mkdir()
    lab.copy_notebooks(folder, paths=[NOTEBOOK])
    # no GPU in CI: the kernels module would pick the interpreter anyway; say so up front
    proc, base, token = lab.start_lab(folder, "small", tmp_path / "jupyterlab.log",
                                      env={"TRITON_INTERPRET": os.environ.get("TRITON_INTERPRET", "1")},
                                      timeout_s=60)
    try:
        yield base, token
    finally:
        lab.stop_lab(proc)


# the output area holding the slider labelled SLIDER_LABEL, and a signature of the plots in it
_PLOT_SIGNATURE = """(label) => {
  const found = window.__flashsimSlider(label);
  if (!found) return null;
  const slider = document.querySelectorAll('.widget-slider')[found.index];
  const area = document.querySelectorAll('.jp-Cell-outputArea')[found.area];
  const imgs = Array.from(area.querySelectorAll('img')).map(i => i.getAttribute('src') || '');
  const svgs = Array.from(area.querySelectorAll('svg')).filter(s => !s.closest('.widget-slider'))
      .map(s => s.outerHTML);
  // an ipympl figure draws into <canvas> elements: their pixels, as data URLs
  const canvases = Array.from(area.querySelectorAll('canvas')).filter(c => c.width > 50 && c.height > 50)
      .map(c => { try { return c.toDataURL(); } catch (e) { return ''; } });
  return {plots: imgs.concat(svgs, canvases), value: found.value, index: found.area,
          sig: window.__flashsimSig(window.__flashsimPlot(area))};
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
    errors: list[str] = []
    profile = tempfile.mkdtemp(prefix="flashsim-chromium-")
    try:
        with sync_api.sync_playwright() as pw:
            # the temporary profile is Chromium's --user-data-dir (Playwright passes it for a persistent context)
            browser, page = lab.launch_chromium(pw, Path(profile))
            page.on("console", lambda m: errors.append(f"console.{m.type}: {m.text} @ {m.location}")
                    if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
            lab.open_notebook(page, base, token, NOTEBOOK.name, timeout_s=60)
            run = lab.run_all(page, BUDGET_S - 30 - (time.monotonic() - t0))
            state = run["state"]
            cell_errors = [e for c in (state or {}).get("cells", []) for e in c["errors"]]
            assert not cell_errors, f"cells raised in the browser: {cell_errors}"
            assert state and all(c["count"] is not None for c in state["cells"]), (
                f"the notebook did not finish within the time budget: {state}")
            print(f"browser test: notebook ran in {time.monotonic() - t0:.1f} s")

            slider = page.locator(".widget-slider", has=page.locator(".widget-label", has_text=SLIDER_LABEL)).first
            slider.wait_for(state="visible", timeout=30_000)
            slider.scroll_into_view_if_needed()
            page.evaluate(lab.PLOT_JS)
            before = page.evaluate(_PLOT_SIGNATURE, SLIDER_LABEL)
            assert before is not None, f"no slider labelled {SLIDER_LABEL!r} on the page"
            assert before["plots"], f"no plot (<img>, <svg> or <canvas>) next to the {SLIDER_LABEL!r} slider"
            area = page.locator(".jp-Cell-outputArea").nth(before["index"])
            # the first frame may still be on its way: wait until the plot shows one state, then record it
            png_before, settled = lab.settled_screenshot(page, lambda: _largest_plot(area), timeout_s=60)
            assert settled, "the plot kept changing before the slider was touched"
            before = page.evaluate(_PLOT_SIGNATURE, SLIDER_LABEL)
            shot_before, plot_before = tmp_path / "ch05_before.png", tmp_path / "ch05_plot_before.png"
            area.screenshot(path=str(shot_before))
            plot_before.write_bytes(png_before)

            handle = slider.locator(".noUi-handle").first
            handle.focus()
            page.keyboard.press("ArrowRight")
            # the readout moves at once; the kernel's new frame arrives when it arrives: poll what is on the screen
            png_after, _ = lab.settled_screenshot(page, lambda: _largest_plot(area), timeout_s=90,
                                                 differ_from=png_before)
            after = page.evaluate(_PLOT_SIGNATURE, SLIDER_LABEL)
            shot_after, plot_after = tmp_path / "ch05_after.png", tmp_path / "ch05_plot_after.png"
            area.screenshot(path=str(shot_after))
            plot_after.write_bytes(png_after)
            shot_page = tmp_path / "ch05_page.png"
            page.screenshot(path=str(shot_page), full_page=False)
            print(f"browser test: screenshots in {tmp_path}: {shot_before.name}, {shot_after.name}, "
                  f"{plot_before.name}, {plot_after.name}, {shot_page.name}")
            print(f"browser test: slider {SLIDER_LABEL} {before['value']} -> {after['value']}")
            assert after["value"] != before["value"], f"the {SLIDER_LABEL} slider did not move ({before['value']})"
            assert after["plots"] != before["plots"], "moving the slider did not redraw the plot"
            assert after["sig"] != before["sig"], "the largest plot's pixels did not change"
            assert plot_before.read_bytes() != plot_after.read_bytes(), (
                f"the plot looks the same before and after moving the slider: {plot_before}, {plot_after}")
            browser.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    assert not errors, "the browser console logged errors:\n" + "\n".join(errors)
    elapsed = time.monotonic() - t0
    print(f"browser test: {elapsed:.1f} s")
    assert elapsed < BUDGET_S, f"the browser test took {elapsed:.0f} s (budget {BUDGET_S} s)"
