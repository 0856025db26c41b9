"""Key press → changed pixels for every slider and Play control of the chapters, in a real JupyterLab and Chromium
(issue 12: median ≤ 100 ms, worst ≤ 250 ms, Play keeps up with its interval).

The script copies the notebooks to a temporary folder (JupyterLab's autosave never touches the repository), starts
JupyterLab on localhost with the course's JupyterLab settings (``notebooks/.jupyter``), opens each chapter in
Debian's Chromium through Playwright, runs all cells at the chosen size and then, for every slider:

1. arms a probe in the page: a keydown listener (capture phase) and a requestAnimationFrame loop that hashes the
   pixels of the dashboard's figure (the ipympl canvas, or the <img> of the fallback) in the same output area;
2. focuses the slider's handle and presses ArrowRight (ArrowLeft at the end of the range);
3. latency = first frame whose pixels differ − the keydown's timestamp (both on the page's performance clock).

For a Play button it presses play, records the time of every pixel change for a few seconds, presses pause, and
compares the intervals between frames with the Play's interval.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/dashboard_latency.py --chapters 00 01 02 03 04 05 06
    .venv/bin/python benchmarks/dashboard_latency.py --plot benchmarks/results/dashboard_latency_<date>.json

It writes ``benchmarks/results/dashboard_latency_<date>.json`` and ``.md`` (date, machine, versions, command) and
draws ``figures/dashboard_latency.png`` with :func:`plot`.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("FLASHSIM_CHROMIUM", "/usr/bin/chromium")
# the flags tests/course/test_browser.py launches Chromium with
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]
TARGET_MEDIAN_MS, TARGET_WORST_MS = 100.0, 250.0

# --- page-side probes -------------------------------------------------------------------------------------------
_HELPERS = """() => {
  window.__flashsimPlot = (area) => {
    let best = null, bestArea = -1;
    for (const el of area.querySelectorAll('.jupyter-matplotlib-canvas-div canvas, img')) {
      const r = el.getBoundingClientRect();
      if (r.width * r.height > bestArea) { best = el; bestArea = r.width * r.height; }
    }
    return best;
  };
  window.__flashsimSig = (el) => {
    if (!el) return 0;
    if (el.tagName === 'IMG') { const s = el.getAttribute('src') || ''; let h = s.length;
      for (let i = 0; i < s.length; i += 97) h = (h * 31 + s.charCodeAt(i)) | 0; return h; }
    const d = el.getContext('2d').getImageData(0, 0, el.width, el.height).data;
    let h = 0;
    for (let i = 0; i < d.length; i += 8) h = (h * 31 + d[i] + 7 * d[i + 1] + 13 * d[i + 2]) | 0;
    return h;
  };
}"""

_CONTROLS = """() => {
  const areas = Array.from(document.querySelectorAll('.jp-Cell-outputArea'));
  const out = [];
  for (const s of document.querySelectorAll('.widget-slider')) {
    const area = s.closest('.jp-Cell-outputArea');
    const label = s.querySelector('.widget-label');
    const box = s.parentElement;
    out.push({kind: 'slider', area: areas.indexOf(area), label: label ? label.textContent.trim() : '',
              index: Array.from(document.querySelectorAll('.widget-slider')).indexOf(s),
              play: !!(box && box.querySelector('.widget-play'))});
  }
  return out;
}"""

_ARM_PRESS = """([area, timeout]) => {
  const el = window.__flashsimPlot(document.querySelectorAll('.jp-Cell-outputArea')[area]);
  const s0 = window.__flashsimSig(el);
  const st = {t0: null, t1: null, done: false};
  window.__flashsimProbe = st;
  document.addEventListener('keydown', e => { if (st.t0 === null) st.t0 = e.timeStamp; }, {capture: true, once: true});
  const loop = () => {
    if (st.done) return;
    if (st.t0 !== null && window.__flashsimSig(el) !== s0) { st.t1 = performance.now(); st.done = true; return; }
    requestAnimationFrame(loop);
  };
  requestAnimationFrame(loop);
  setTimeout(() => { st.done = true; }, timeout);
}"""

_ARM_PLAY = """([area, duration]) => {
  const el = window.__flashsimPlot(document.querySelectorAll('.jp-Cell-outputArea')[area]);
  let last = window.__flashsimSig(el);
  const st = {t0: performance.now(), changes: [], done: false};
  window.__flashsimProbe = st;
  const loop = () => {
    if (performance.now() - st.t0 > duration) { st.done = true; return; }
    const s = window.__flashsimSig(el);
    if (s !== last) { st.changes.push(performance.now()); last = s; }
    requestAnimationFrame(loop);
  };
  requestAnimationFrame(loop);
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
  const running = Array.from(document.querySelectorAll('.jp-Notebook .jp-InputPrompt'))
      .some(p => p.textContent.includes('*'));
  return {ready: true, kernel: kernel ? kernel.status : null, cells, running};
}"""

_KERNEL_READY = ("() => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget; "
                 "const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel; "
                 "return !!k && k.status === 'idle'; }")


# --- JupyterLab -------------------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_lab(folder: Path, size: str, log: Path):
    """JupyterLab serving `folder` on localhost: (process, base url, token)."""
    port, token = _free_port(), uuid.uuid4().hex
    runtime = folder / ".jupyter-runtime"
    runtime.mkdir(exist_ok=True)
    env = dict(os.environ, FLASHSIM_SIZE=size, JUPYTER_RUNTIME_DIR=str(runtime), PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                                         if p]),
               JUPYTER_CONFIG_PATH=str(ROOT / "notebooks" / ".jupyter"),
               MPLBACKEND="module://matplotlib_inline.backend_inline")
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
           f"--ServerApp.root_dir={folder}", "--LabApp.expose_app_in_browser=True",
           "--LabApp.extension_manager=readonly", "--allow-root"]
    fh = open(log, "w")
    proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=str(folder),
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"JupyterLab exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2) as r:
                if r.status == 200:
                    return proc, base, token
        except OSError:
            time.sleep(0.3)
    proc.terminate()
    raise RuntimeError(f"JupyterLab did not answer within 90 s:\n{log.read_text()[-3000:]}")


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


# --- one chapter -------------------------------------------------------------------------------------------------
def run_all(page, budget_s: float) -> dict:
    page.wait_for_function(_KERNEL_READY, timeout=90_000)
    t0 = time.monotonic()
    page.evaluate("async () => { await window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
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
    done = bool(state and all(c["count"] is not None for c in state["cells"]))
    return {"run_all_s": round(time.monotonic() - t0, 1), "errors": errors, "finished": done}


def measure_slider(page, ctl: dict, presses: int, timeout_ms: int) -> dict:
    slider = page.locator(".widget-slider").nth(ctl["index"])
    slider.scroll_into_view_if_needed()
    handle = slider.locator(".noUi-handle").first
    lat, missed = [], 0
    for k in range(presses):
        now, top = (float(handle.get_attribute(a) or 0) for a in ("aria-valuenow", "aria-valuemax"))
        low = float(handle.get_attribute("aria-valuemin") or 0)
        key = "ArrowLeft" if now >= top or (k % 2 == 1 and now > low) else "ArrowRight"
        handle.focus()
        page.evaluate(_ARM_PRESS, [ctl["area"], timeout_ms])
        page.keyboard.press(key)
        page.wait_for_function("() => window.__flashsimProbe.done", timeout=timeout_ms + 2000)
        probe = page.evaluate("() => window.__flashsimProbe")
        if probe["t1"] is None or probe["t0"] is None:
            missed += 1
        else:
            lat.append(round(probe["t1"] - probe["t0"], 1))
        page.wait_for_timeout(250)      # let trailing messages settle before the next press
    return {"kind": "slider", "label": ctl["label"], "latencies_ms": lat, "missed": missed,
            "median_ms": statistics.median(lat) if lat else None, "worst_ms": max(lat) if lat else None}


def measure_play(page, ctl: dict, interval_ms: int | None, duration_ms: int) -> dict:
    slider = page.locator(".widget-slider").nth(ctl["index"])
    box = slider.locator("xpath=..")
    handle = slider.locator(".noUi-handle").first
    handle.focus()
    page.keyboard.press("Home")            # start from the beginning of the range
    page.wait_for_timeout(1500)
    steps_left = float(handle.get_attribute("aria-valuemax") or 0) - float(handle.get_attribute("aria-valuemin") or 0)
    buttons = box.locator(".widget-play button")
    page.evaluate(_ARM_PLAY, [ctl["area"], duration_ms])
    buttons.nth(0).click()                 # play
    page.wait_for_function("() => window.__flashsimProbe.done", timeout=duration_ms + 5000)
    buttons.nth(1).click()                 # pause
    probe = page.evaluate("() => window.__flashsimProbe")
    times = probe["changes"]
    gaps = [round(b - a, 1) for a, b in zip(times, times[1:])]
    # a Play stops at the end of its range: a short range has fewer frames than the window holds
    steps_expected = min(duration_ms / interval_ms, steps_left) if interval_ms else None
    med = statistics.median(gaps) if gaps else None
    keeps_up = bool(interval_ms and len(times) >= 0.8 * (steps_expected or 0)
                    and (med is None and len(times) >= 1 or med is not None and med <= 1.15 * interval_ms))
    page.wait_for_timeout(1000)
    return {"kind": "play", "label": ctl["label"], "interval_ms": interval_ms, "window_ms": duration_ms,
            "frames": len(times), "frames_expected": round(steps_expected, 1) if steps_expected else None,
            "frame_gaps_ms": gaps, "median_gap_ms": med, "worst_gap_ms": max(gaps) if gaps else None,
            "keeps_up": keeps_up}


def play_intervals() -> dict:
    """{slider label: Play interval (ms)} from the dashboards' own controls (chapters 00-13 where importable)."""
    import importlib
    import inspect
    from flashsim.course.kit.dashboard import Dashboard
    out = {}
    for ch in range(14):
        try:
            mod = importlib.import_module(f"flashsim.course.ch{ch:02d}.dashboards")
        except Exception:  # noqa: BLE001 - a chapter that does not import is reported by its own run
            continue
        for _, cls in inspect.getmembers(mod, inspect.isclass):
            if not (issubclass(cls, Dashboard) and cls.__module__ == mod.__name__):
                continue
            try:
                controls = cls().controls()
            except Exception:  # noqa: BLE001 - bases and dashboards that need arguments
                continue
            for c in controls.values():
                if c.play_ms:
                    out.setdefault(f"ch{ch:02d}", {})[c.label] = c.play_ms
    return out


def chapter(page, base, token, nb: Path, args, intervals: dict) -> dict:
    url = f"{base}/lab/tree/{nb.name}?reset&token={token}"
    page.goto(url, wait_until="domcontentloaded", timeout=90_000)
    run = run_all(page, args.budget)
    rec = {"notebook": nb.name, **run, "controls": []}
    if run["errors"] or not run["finished"]:
        return rec
    page.wait_for_timeout(2000)
    page.evaluate(_HELPERS)
    ch = nb.name[:2]
    for ctl in page.evaluate(_CONTROLS):
        if ctl["area"] < 0:
            continue
        rec["controls"].append(measure_slider(page, ctl, args.presses, args.timeout_ms))
        if ctl["play"]:
            iv = intervals.get(f"ch{ch}", {}).get(ctl["label"])
            window = max(3000, min(6000, 8 * (iv or 500)))
            rec["controls"].append(measure_play(page, ctl, iv, window))
    return rec


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version
    out = {"python": platform.python_version()}
    for pkg in ("jupyterlab", "ipywidgets", "ipympl", "matplotlib", "playwright", "numpy"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    try:
        out["chromium"] = subprocess.run([CHROMIUM, "--version"], capture_output=True, text=True,
                                         timeout=30).stdout.strip()
    except OSError:
        out["chromium"] = None
    return out


def _machine() -> dict:
    model = ""
    try:
        model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {"platform": platform.platform(), "cpu": model, "cores": os.cpu_count(),
            "load_average_at_start": [round(x, 2) for x in load] if load else None}


def summarize(data: dict) -> dict:
    sliders = [c for r in data["chapters"] for c in r["controls"] if c["kind"] == "slider" and c["latencies_ms"]]
    plays = [c for r in data["chapters"] for c in r["controls"] if c["kind"] == "play"]
    all_lat = [x for c in sliders for x in c["latencies_ms"]]
    return {"sliders": len(sliders), "presses": len(all_lat),
            "median_ms": statistics.median(all_lat) if all_lat else None, "worst_ms": max(all_lat) if all_lat else None,
            "sliders_meeting_median": sum(c["median_ms"] <= TARGET_MEDIAN_MS for c in sliders),
            "sliders_meeting_worst": sum(c["worst_ms"] <= TARGET_WORST_MS for c in sliders),
            "plays": len(plays), "plays_keeping_up": sum(p["keeps_up"] for p in plays)}


def markdown(data: dict) -> str:
    s = data["summary"]
    lines = [f"# Dashboard latency, {data['date']}", "",
             f"Key press → changed pixels in JupyterLab + Chromium, size `{data['size']}`, on {data['machine']['cpu']} "
             f"({data['machine']['cores']} cores, load average at start {data['machine']['load_average_at_start']}).",
             f"Command: `{data['command']}`.", f"Versions: {json.dumps(data['versions'])}.", "",
             f"Targets (issue 12): median ≤ {TARGET_MEDIAN_MS:.0f} ms, worst ≤ {TARGET_WORST_MS:.0f} ms per slider; "
             "Play keeps up with its interval.", "",
             f"All presses: median {s['median_ms']} ms, worst {s['worst_ms']} ms over {s['presses']} presses of "
             f"{s['sliders']} sliders; {s['sliders_meeting_median']}/{s['sliders']} sliders meet the median target, "
             f"{s['sliders_meeting_worst']}/{s['sliders']} the worst-case target; "
             f"{s['plays_keeping_up']}/{s['plays']} Play controls keep up.", "",
             "| chapter | control | kind | median (ms) | worst (ms) | presses / frames | Play interval (ms) | "
             "keeps up |", "|---|---|---|---|---|---|---|---|"]
    for r in data["chapters"]:
        if r.get("errors") or not r.get("finished"):
            lines.append(f"| {r['notebook']} | — | run failed: {r.get('errors') or 'not finished'} | | | | | |")
        for c in r["controls"]:
            if c["kind"] == "slider":
                lines.append(f"| {r['notebook'][:2]} | {c['label']} | slider | {c['median_ms']} | {c['worst_ms']} | "
                             f"{len(c['latencies_ms'])} (+{c['missed']} missed) | | |")
            else:
                lines.append(f"| {r['notebook'][:2]} | {c['label']} | Play | {c['median_gap_ms']} (frame gap) | "
                             f"{c['worst_gap_ms']} | {c['frames']} of ~{c['frames_expected']} | {c['interval_ms']} | "
                             f"{'yes' if c['keeps_up'] else 'no'} |")
    return "\n".join(lines) + "\n"


def plot(data, path) -> None:
    """figures/dashboard_latency.png from a result (dict or JSON path): each slider's median and worst latency
    (bars) against the targets, and each Play control's median frame gap against its interval."""
    from flashsim.course.kit.plotting import new_figure
    if not isinstance(data, dict):
        data = json.loads(Path(data).read_text())
    sliders = [(f"{r['notebook'][:2]} {c['label']}", c) for r in data["chapters"] for c in r["controls"]
               if c["kind"] == "slider" and c["latencies_ms"]]
    plays = [(f"{r['notebook'][:2]} {c['label']}", c) for r in data["chapters"] for c in r["controls"]
             if c["kind"] == "play"]
    fig = new_figure((9, 3.2 + 0.22 * (len(sliders) + len(plays))))
    ax = fig.add_subplot()
    ys = list(range(len(sliders)))
    ax.barh([y + 0.2 for y in ys], [c["worst_ms"] for _, c in sliders], 0.4, color="#ff9896", label="worst")
    ax.barh([y - 0.2 for y in ys], [c["median_ms"] for _, c in sliders], 0.4, color="#1f77b4", label="median")
    off = len(sliders)
    for k, (_, c) in enumerate(plays):
        y = off + k
        if c["median_gap_ms"] is not None:
            ax.barh(y - 0.2, c["median_gap_ms"], 0.4, color="#2ca02c" if c["keeps_up"] else "#d62728",
                    label="Play: median frame gap" if k == 0 else None)
        if c["interval_ms"]:
            ax.plot([c["interval_ms"]] * 2, [y - 0.45, y + 0.45], color="k", lw=2,
                    label="Play interval" if k == 0 else None)
    ax.axvline(TARGET_MEDIAN_MS, color="#1f77b4", ls="--", lw=1, label=f"median target {TARGET_MEDIAN_MS:.0f} ms")
    ax.axvline(TARGET_WORST_MS, color="#d62728", ls="--", lw=1, label=f"worst target {TARGET_WORST_MS:.0f} ms")
    ax.set_yticks(list(range(len(sliders) + len(plays))),
                  [n for n, _ in sliders] + [f"{n} (Play)" for n, _ in plays], fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("ms (key press → changed pixels; Play: time between frames)")
    ax.set_title(f"Dashboard latency in JupyterLab + Chromium, {data['size']} size, {data['date']} "
                 f"({data['machine']['cores']}-core CPU)", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--chapters", nargs="*", default=[f"{i:02d}" for i in range(14)])
    p.add_argument("--size", default="full")
    p.add_argument("--presses", type=int, default=8)
    p.add_argument("--timeout-ms", type=int, default=8000)
    p.add_argument("--budget", type=float, default=400.0, help="seconds to run all cells of one chapter")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    p.add_argument("--figure", default=str(ROOT / "figures" / "dashboard_latency.png"))
    p.add_argument("--plot", help="only draw the figure from this result JSON")
    args = p.parse_args(argv)
    if args.plot:
        plot(args.plot, args.figure)
        return 0
    from playwright.sync_api import sync_playwright
    date = dt.date.today().isoformat()
    work = Path(tempfile.mkdtemp(prefix="flashsim-latency-"))
    nbs = []
    for ch in args.chapters:
        for nb in sorted((ROOT / "notebooks").glob(f"{ch}_*.ipynb")):
            shutil.copy(nb, work / nb.name)
            nbs.append(work / nb.name)
    data = {"date": date, "size": args.size, "machine": _machine(), "versions": _versions(),
            "command": "python benchmarks/dashboard_latency.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "targets": {"median_ms": TARGET_MEDIAN_MS, "worst_ms": TARGET_WORST_MS}, "chapters": []}
    intervals = play_intervals()
    proc, base, token = start_lab(work, args.size, work / "jupyterlab.log")
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch_persistent_context(str(work / "chromium-profile"), executable_path=CHROMIUM,
                                                            headless=True, args=CHROMIUM_ARGS,
                                                            viewport={"width": 1400, "height": 1000})
            page = browser.pages[0] if browser.pages else browser.new_page()
            for nb in nbs:
                t0 = time.monotonic()
                try:
                    rec = chapter(page, base, token, nb, args, intervals)
                except Exception as exc:  # noqa: BLE001 - record the failure, go on with the next chapter
                    rec = {"notebook": nb.name, "errors": [f"{type(exc).__name__}: {exc}"], "finished": False,
                           "controls": []}
                rec["wall_s"] = round(time.monotonic() - t0, 1)
                data["chapters"].append(rec)
                print(f"{nb.name}: {rec.get('run_all_s')} s to run, {len(rec['controls'])} controls measured, "
                      f"errors {rec.get('errors')}", flush=True)
                shutdown_kernels(base, token)
            browser.close()
    finally:
        stop_lab(proc)
    data["summary"] = summarize(data)
    out = Path(args.out)
    stem = out / f"dashboard_latency_{date}"
    stem.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")
    stem.with_suffix(".md").write_text(markdown(data))
    plot(data, args.figure)
    print(markdown(data))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
