"""Key press → changed pixels for every slider and Play control of every chapter, in a real JupyterLab and Chromium
(issue 12: median ≤ 100 ms, worst ≤ 250 ms per slider, Play keeps up with its interval).

One command measures chapters 00-14 at full size (about 10 minutes on a 2-core CPU) and writes the record and the
figure::

    PYTHONPATH=$PWD .venv/bin/python benchmarks/dashboard_latency.py --name dashboard_latency_<date>_<n>
    .venv/bin/python benchmarks/dashboard_latency.py --plot benchmarks/results/dashboard_latency_<date>.json

The driver (:mod:`flashsim.course.kit.lab_browser`, shared with ``tests/course/test_browser.py``) copies the
notebooks to a temporary folder, starts JupyterLab on localhost with the course's settings, opens each chapter in
Debian's Chromium through Playwright and runs all cells at the chosen size. Then, for every slider on the page:

1. a probe in the page: a keydown listener (capture phase) and a requestAnimationFrame loop that hashes the
   pixels of the largest plot (the ipympl canvas, or an ``<img>``) in the slider's output area;
2. focus the slider's handle, press ArrowRight / ArrowLeft (alternating, so the slider stays near where the
   chapter left it);
3. latency = the first frame whose pixels differ − the keydown's timestamp (both on the page's clock).

For a Play button: press Home, press play, record the time of every pixel change for a few seconds (or until the
end of the range), press pause; the Play keeps up when the median gap between frames is within 15 % of its
interval and at least 80 % of the expected frames came (a range of one step: its one frame came within the
interval + the worst-case target).

To say where a slow press went, each press also records the browser's long tasks (``longtask_ms``) and whether
JupyterLab saved the notebook meanwhile; after each control the kernel reports its side (the dashboards'
``FigureView.refresh_ms`` and ipympl canvas ``draw_ms``, Python's garbage collections). The record holds the load
average at the start, before and after each chapter, and at the end: on a shared machine a slow run says little.

It writes ``benchmarks/results/<name>.json`` and ``.md`` (date, machine, versions, command) and draws
``figures/dashboard_latency.png`` with :func:`plot`.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from flashsim.course.kit import lab_browser as lab  # noqa: E402
from flashsim.course.result_figures import (TARGET_MEDIAN_MS, TARGET_WORST_MS, latency_plays as _plays,  # noqa: E402
                                           latency_sliders as _sliders)
from flashsim.course.result_figures import dashboard_latency as plot  # noqa: E402  (figures/dashboard_latency.png)

PLAY_SLACK = 1.15            # a Play keeps up when its median frame gap is within 15 % of the interval

# --- page-side probes -------------------------------------------------------------------------------------------
_CONTROLS = """() => {
  const areas = Array.from(document.querySelectorAll('.jp-Cell-outputArea'));
  const all = Array.from(document.querySelectorAll('.widget-slider'));
  return all.map((s, index) => {
    const label = s.querySelector('.widget-label');
    const box = s.parentElement;
    return {kind: 'slider', area: areas.indexOf(s.closest('.jp-Cell-outputArea')),
            label: label ? label.textContent.trim() : '', index,
            play: !!(box && box.querySelector('.widget-play'))};
  });
}"""

# the notebook's saves (JupyterLab's autosave) and the browser's long tasks, from now on
_WATCH = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  window.__flashsimSaves = [];
  if (w && w.context && w.context.saveState) {
    w.context.saveState.connect((_, s) => window.__flashsimSaves.push([performance.now(), s]));
  }
  window.__flashsimLong = [];
  try {
    new PerformanceObserver(list => { for (const e of list.getEntries())
      window.__flashsimLong.push([e.startTime, e.duration]); }).observe({entryTypes: ['longtask']});
  } catch (e) {}
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

# what happened in the browser between the key press and the frame
_PRESS_CONTEXT = """() => {
  const st = window.__flashsimProbe;
  const t0 = st.t0, t1 = st.t1 === null ? performance.now() : st.t1;
  const long = (window.__flashsimLong || []).filter(([s, d]) => s + d > t0 && s < t1);
  const saves = (window.__flashsimSaves || []).filter(([t, s]) => t > t0 - 2000 && t < t1);
  return {t0: st.t0, t1: st.t1, longtask_ms: Math.round(long.reduce((a, [s, d]) => a + d, 0)),
          saving: saves.length > 0};
}"""

_ARM_PLAY = """([area, duration]) => {
  const el = window.__flashsimPlot(document.querySelectorAll('.jp-Cell-outputArea')[area]);
  let last = window.__flashsimSig(el);
  const st = {t0: performance.now(), click: null, changes: [], done: false};
  window.__flashsimProbe = st;
  document.addEventListener('click', e => { if (st.click === null) st.click = e.timeStamp; },
                            {capture: true, once: true});
  const loop = () => {
    if (performance.now() - st.t0 > duration) { st.done = true; return; }
    const s = window.__flashsimSig(el);
    if (s !== last) { st.changes.push(performance.now()); last = s; }
    requestAnimationFrame(loop);
  };
  requestAnimationFrame(loop);
}"""

# runs Python in the notebook's kernel, returns its stdout
_KERNEL_EXEC = """async (code) => {
  const k = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
  const f = k.requestExecute({code, silent: false, store_history: false});
  let out = '';
  f.onIOPub = msg => { if (msg.header.msg_type === 'stream') out += msg.content.text; };
  await f.done;
  return out;
}"""

# kernel side: Python's garbage collections timed from now on
_KERNEL_SETUP = """
import gc as _fs_gc, time as _fs_time
_fs_gc_log = []
def _fs_gc_cb(phase, info, _t=[0.0]):
    if phase == "start":
        _t[0] = _fs_time.perf_counter()
    else:
        _fs_gc_log.append((info["generation"], round((_fs_time.perf_counter() - _t[0]) * 1e3, 1)))
_fs_gc.callbacks.append(_fs_gc_cb)
"""

# kernel side: every shown dashboard's Play intervals, and what its figures spent since the last call
_KERNEL_REPORT = """
import json as _fs_json
from flashsim.course.kit.dashboard import Dashboard as _FsDash
_fs_out = {"plays": {}, "refresh_ms": [], "draw_ms": [], "gc": list(_fs_gc_log)}
_fs_gc_log.clear()
for _fs_v in list(globals().values()):
    if isinstance(_fs_v, _FsDash):
        for _fs_view in _fs_v._views:
            for _fs_name, _fs_play in _fs_view.plays.items():
                _fs_out["plays"][_fs_view.specs[_fs_name].label] = _fs_play.interval
            _fs_fv = _fs_view.figure
            _fs_out["refresh_ms"] += _fs_fv.refresh_ms
            _fs_out["draw_ms"] += list(getattr(_fs_fv.fig.canvas, "draw_ms", []))
            _fs_fv.refresh_ms = []
            if hasattr(_fs_fv.fig.canvas, "draw_ms"):
                _fs_fv.fig.canvas.draw_ms = []
print(_fs_json.dumps(_fs_out))
"""


def _kernel_report(page) -> dict:
    try:
        out = page.evaluate(_KERNEL_EXEC, _KERNEL_REPORT).strip().splitlines()
        return json.loads(out[-1]) if out else {}
    except Exception as exc:  # noqa: BLE001 - the kernel's side is a diagnosis, not the measurement
        return {"error": f"{type(exc).__name__}: {exc}"}


def _kernel_side(rep: dict) -> dict:
    """The kernel's share of a control's presses: its figures' refresh and draw times, its garbage collections."""
    refresh = [ms for _, ms in rep.get("refresh_ms", [])]
    how = sorted({h for h, _ in rep.get("refresh_ms", [])})
    gcs = rep.get("gc", [])
    return {"refresh_ms_median": _r(statistics.median(refresh)) if refresh else None,
            "refresh_ms_max": max(refresh) if refresh else None, "refresh_kinds": how,
            "draw_ms_median": _r(statistics.median(rep["draw_ms"])) if rep.get("draw_ms") else None,
            "draws": len(rep.get("draw_ms", [])),
            "gc_gen2": sum(1 for g, _ in gcs if g == 2), "gc_ms_max": max((ms for _, ms in gcs), default=0.0)}


def _r(x, nd: int = 1):
    return None if x is None else round(float(x), nd)


def _load() -> list:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else []


# --- one control -------------------------------------------------------------------------------------------------
def measure_slider(page, ctl: dict, presses: int, timeout_ms: int) -> dict:
    slider = page.locator(".widget-slider").nth(ctl["index"])
    slider.scroll_into_view_if_needed()
    handle = slider.locator(".noUi-handle").first
    lat, missed, context = [], 0, []
    _kernel_report(page)                       # start the kernel's side afresh
    for k in range(presses):
        now, top, low = (float(handle.get_attribute(a) or 0) for a in ("aria-valuenow", "aria-valuemax",
                                                                         "aria-valuemin"))
        key = "ArrowLeft" if now >= top or (k % 2 == 1 and now > low) else "ArrowRight"
        handle.focus()
        page.evaluate(_ARM_PRESS, [ctl["area"], timeout_ms])
        page.keyboard.press(key)
        page.wait_for_function("() => window.__flashsimProbe.done", timeout=timeout_ms + 2000)
        probe = page.evaluate(_PRESS_CONTEXT)
        if probe["t1"] is None or probe["t0"] is None:
            missed += 1
            context.append({"missed": True, "longtask_ms": probe["longtask_ms"], "saving": probe["saving"]})
        else:
            lat.append(_r(probe["t1"] - probe["t0"]))
            context.append({"longtask_ms": probe["longtask_ms"], "saving": probe["saving"]})
        page.wait_for_timeout(250)      # let trailing messages settle before the next press
    rep = _kernel_report(page)
    return {"kind": "slider", "label": ctl["label"], "latencies_ms": lat, "missed": missed, "presses": context,
            "median_ms": _r(statistics.median(lat)) if lat else None, "worst_ms": max(lat) if lat else None,
            "kernel": _kernel_side(rep), "plays": rep.get("plays", {})}


def measure_play(page, ctl: dict, interval_ms: int | None, duration_ms: int) -> dict:
    slider = page.locator(".widget-slider").nth(ctl["index"])
    box = slider.locator("xpath=..")
    handle = slider.locator(".noUi-handle").first
    handle.focus()
    page.keyboard.press("Home")            # start from the beginning of the range
    page.wait_for_timeout(1500)
    steps_left = float(handle.get_attribute("aria-valuemax") or 0) - float(handle.get_attribute("aria-valuemin") or 0)
    if interval_ms:                        # a Play stops at the end of its range: no longer window than that
        duration_ms = int(min(duration_ms, (steps_left + 1.5) * interval_ms + 500))
    buttons = box.locator(".widget-play button")
    page.evaluate(_ARM_PLAY, [ctl["area"], duration_ms])
    buttons.nth(0).click()                 # play
    page.wait_for_function("() => window.__flashsimProbe.done", timeout=duration_ms + 5000)
    buttons.nth(1).click()                 # pause
    probe = page.evaluate("() => window.__flashsimProbe")
    times = probe["changes"]
    gaps = [_r(b - a) for a, b in zip(times, times[1:])]
    first = _r(times[0] - probe["click"]) if times and probe.get("click") is not None else None
    # the frames the window can hold, or the steps the range has left
    expected = min(duration_ms / interval_ms - 1, steps_left) if interval_ms else None
    med = _r(statistics.median(gaps)) if gaps else None
    if not interval_ms:
        keeps_up = None
    elif expected is not None and expected >= 2:
        keeps_up = bool(len(times) >= 0.8 * expected and med is not None and med <= PLAY_SLACK * interval_ms)
    else:                                  # one step: its frame came within the interval + the latency target
        keeps_up = bool(times and first is not None and first <= interval_ms + TARGET_WORST_MS)
    page.wait_for_timeout(1000)
    return {"kind": "play", "label": ctl["label"], "interval_ms": interval_ms, "window_ms": duration_ms,
            "steps": int(steps_left), "frames": len(times), "frames_expected": _r(expected),
            "first_frame_ms": first, "frame_gaps_ms": gaps, "median_gap_ms": med,
            "worst_gap_ms": max(gaps) if gaps else None, "keeps_up": keeps_up}


def chapter(page, base, token, nb: Path, args) -> dict:
    lab.open_notebook(page, base, token, nb.name)
    load_before = _load()
    run = lab.run_all(page, args.budget)
    rec = {"notebook": nb.name, "run_all_s": run["run_all_s"], "errors": run["errors"], "finished": run["finished"],
           "load_before": load_before, "controls": []}
    if run["errors"] or not run["finished"]:
        return rec
    page.wait_for_timeout(2000)
    page.evaluate(lab.PLOT_JS)
    page.evaluate(_WATCH)
    page.evaluate(_KERNEL_EXEC, _KERNEL_SETUP)
    plays = _kernel_report(page).get("plays", {})
    for ctl in page.evaluate(_CONTROLS):
        if ctl["area"] < 0:
            continue
        rec["controls"].append(measure_slider(page, ctl, args.presses, args.timeout_ms))
        if ctl["play"]:
            iv = plays.get(ctl["label"])
            rec["controls"].append(measure_play(page, ctl, iv, max(3000, min(6000, 9 * (iv or 500)))))
    rec["load_after"] = _load()
    return rec


# --- the record --------------------------------------------------------------------------------------------------
def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version
    out = {"python": platform.python_version()}
    for pkg in ("jupyterlab", "ipywidgets", "ipympl", "matplotlib", "playwright", "numpy"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    try:
        out["chromium"] = subprocess.run([lab.CHROMIUM, "--version"], capture_output=True, text=True,
                                         timeout=30).stdout.strip()
    except OSError:
        out["chromium"] = None
    return out


def _machine() -> dict:
    model = ""
    try:
        model = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "")
    except OSError:
        pass
    return {"platform": platform.platform(), "cpu": model, "cores": os.cpu_count(), "load_average_at_start": _load()}


def _git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip() or None
    except OSError:
        return None


def summarize(data: dict) -> dict:
    sliders = [c for _, c in _sliders(data)]
    plays = [c for _, c in _plays(data)]
    all_lat = [x for c in sliders for x in c["latencies_ms"]]
    loads = [x for r in data["chapters"] for x in (r.get("load_before", [])[:1] + r.get("load_after", [])[:1])]
    return {"sliders": len(sliders), "presses": len(all_lat),
            "median_ms": _r(statistics.median(all_lat)) if all_lat else None,
            "worst_ms": max(all_lat) if all_lat else None,
            "sliders_meeting_median": sum(c["median_ms"] <= TARGET_MEDIAN_MS for c in sliders),
            "sliders_meeting_worst": sum(c["worst_ms"] <= TARGET_WORST_MS for c in sliders),
            "sliders_meeting_both": sum(c["median_ms"] <= TARGET_MEDIAN_MS and c["worst_ms"] <= TARGET_WORST_MS
                                        for c in sliders),
            "missed_presses": sum(c["missed"] for c in sliders),
            "plays": len(plays), "plays_keeping_up": sum(bool(p["keeps_up"]) for p in plays),
            "load_1min_range": [min(loads), max(loads)] if loads else None}


def _fmt(x) -> str:
    return "—" if x is None else (f"{x:.0f}" if abs(x) >= 100 else f"{x:.1f}")


def markdown(data: dict) -> str:
    s = data["summary"]
    m = data["machine"]
    lines = [f"# Dashboard latency, {data['date']}", "",
             f"Key press → changed pixels in JupyterLab + Chromium, size `{data['size']}`, on {m['cpu']} "
             f"({m['cores']} cores). Load average (1, 5, 15 min) at the start {m['load_average_at_start']}, "
             f"at the end {data.get('load_average_at_end')}; the 1-minute load before/after each chapter ranged "
             f"{s['load_1min_range']}.",
             f"Command: `{data['command']}` (code at {data.get('commit')}, {data.get('wall_s')} s).",
             f"Versions: {json.dumps(data['versions'])}.", "",
             f"Targets (issue 12): median ≤ {TARGET_MEDIAN_MS:.0f} ms, worst ≤ {TARGET_WORST_MS:.0f} ms "
             "per slider; "
             f"Play keeps up with its interval (median frame gap ≤ {PLAY_SLACK:.2f} × interval).", "",
             f"All presses: median {_fmt(s['median_ms'])} ms, worst {_fmt(s['worst_ms'])} ms over {s['presses']} "
             f"presses of {s['sliders']} sliders ({s['missed_presses']} presses showed no new frame within the "
             f"timeout); {s['sliders_meeting_both']}/{s['sliders']} sliders meet both targets "
             f"({s['sliders_meeting_median']} the median, {s['sliders_meeting_worst']} the worst case); "
             f"{s['plays_keeping_up']}/{s['plays']} Play controls keep up.", "",
             "Kernel column: the median time the kernel spent on a press (the dashboard's update and, for a blit, "
             "the frame; \"refresh\"/\"redraw\" then also a full render, \"draw\", when the browser asks for "
             "it); the rest of the latency is the messages and the browser. Load on a shared 2-core machine "
             "inflates both.", "",
             "| chapter | control | kind | median (ms) | worst (ms) | presses / frames | kernel: refresh, draw (ms) | "
             "keeps up |", "|---|---|---|---|---|---|---|---|"]
    for r in data["chapters"]:
        ch = r["notebook"][:2]
        if r.get("errors") or not r.get("finished"):
            lines.append(f"| {ch} | — | run failed: {r.get('errors') or 'not finished'} | | | | | |")
        elif not r["controls"]:
            lines.append(f"| {ch} | — | no slider or Play control | | | | | |")
        for c in r["controls"]:
            if c["kind"] == "slider":
                k = c.get("kernel", {})
                ok = c["median_ms"] is not None and c["median_ms"] <= TARGET_MEDIAN_MS and \
                    c["worst_ms"] <= TARGET_WORST_MS
                kern = (f"{_fmt(k.get('refresh_ms_median'))} ({'/'.join(k.get('refresh_kinds', []))}), "
                        f"{_fmt(k.get('draw_ms_median'))}" if k else "")
                lines.append(f"| {ch} | {c['label']} | slider | {_fmt(c['median_ms'])} | {_fmt(c['worst_ms'])} | "
                             f"{len(c['latencies_ms'])}" + (f" (+{c['missed']} missed)" if c["missed"] else "")
                             + f" | {kern} | {'yes' if ok else 'no'} |")
            else:
                iv = c["interval_ms"]
                if c["frames_expected"] is not None and c["frames_expected"] < 2:
                    med = f"one step: frame {_fmt(c['first_frame_ms'])} ms after play"
                    worst = "—"
                else:
                    med, worst = f"gap {_fmt(c['median_gap_ms'])}", _fmt(c["worst_gap_ms"])
                keeps = {True: "yes", False: "no", None: "interval unknown"}[c["keeps_up"]]
                lines.append(f"| {ch} | {c['label']} | Play every {iv} ms | {med} | {worst} | "
                             f"{c['frames']} of {_fmt(c['frames_expected'])} | | {keeps} |")
    slow = [(r, c, i, x) for r, c in _sliders(data) for i, x in enumerate(c["latencies_ms"]) if x > TARGET_WORST_MS]
    if slow:
        lines += ["", "Presses over the worst-case target, with what the browser and the kernel did meanwhile:", ""]
        for r, c, i, x in slow:
            ctx = [p for p in c.get("presses", []) if not p.get("missed")]
            p = ctx[i] if i < len(ctx) else {}
            k = c.get("kernel", {})
            lines.append(f"- {r['notebook'][:2]} {c['label']}, press {i + 1}: {_fmt(x)} ms; browser long tasks "
                         f"{p.get('longtask_ms')} ms{', notebook saving' if p.get('saving') else ''}; kernel refresh "
                         f"max {_fmt(k.get('refresh_ms_max'))} ms, {k.get('gc_gen2', 0)} full garbage collections "
                         f"(longest {_fmt(k.get('gc_ms_max'))} ms) during this control's presses")
    return "\n".join(lines) + "\n"


def _default_name(out: Path, date: str) -> str:
    name, k = f"dashboard_latency_{date}", 1
    while (out / f"{name}.json").exists():
        k += 1
        name = f"dashboard_latency_{date}_{k}"
    return name


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--chapters", nargs="*", default=[f"{i:02d}" for i in range(15)])
    p.add_argument("--size", default="full")
    p.add_argument("--presses", type=int, default=8)
    p.add_argument("--timeout-ms", type=int, default=5000, help="a press with no new frame by then is 'missed'")
    p.add_argument("--budget", type=float, default=300.0, help="seconds to run all cells of one chapter")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    p.add_argument("--name", help="file name of the record, without .json/.md "
                                  "(default: dashboard_latency_<date>, then _2, _3, ... if taken)")
    p.add_argument("--figure", default=str(ROOT / "figures" / "dashboard_latency.png"))
    p.add_argument("--plot", help="only draw the figure from this result JSON")
    p.add_argument("--markdown-only", metavar="JSON", help="only print this result JSON as its table (the .md a run "
                                                          "writes beside it)")
    args = p.parse_args(argv)
    if args.plot:
        plot(args.plot, args.figure)
        return 0
    if args.markdown_only:
        print(markdown(json.loads(Path(args.markdown_only).read_text())), end="")
        return 0
    why = lab.why_not_runnable()
    if why:
        print(why, file=sys.stderr)
        return 2
    from playwright.sync_api import sync_playwright
    t_start = time.monotonic()
    date = dt.datetime.now(dt.timezone.utc).date().isoformat()
    out = Path(args.out)
    name = args.name or _default_name(out, date)
    work = Path(tempfile.mkdtemp(prefix="flashsim-latency-"))
    nbs = lab.copy_notebooks(work, prefixes=args.chapters)
    data = {"date": date, "size": args.size, "machine": _machine(), "versions": _versions(), "commit": _git_commit(),
            "command": "python benchmarks/dashboard_latency.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "targets": {"median_ms": TARGET_MEDIAN_MS, "worst_ms": TARGET_WORST_MS, "play_slack": PLAY_SLACK},
            "chapters": []}
    proc, base, token = lab.start_lab(work, args.size, work / "jupyterlab.log")
    try:
        with sync_playwright() as pw:
            browser, page = lab.launch_chromium(pw, work / "chromium-profile")
            for nb in nbs:
                t0 = time.monotonic()
                try:
                    rec = chapter(page, base, token, nb, args)
                except Exception as exc:  # noqa: BLE001 - record the failure, go on with the next chapter
                    rec = {"notebook": nb.name, "errors": [f"{type(exc).__name__}: {exc}"], "finished": False,
                           "controls": []}
                rec["wall_s"] = round(time.monotonic() - t0, 1)
                data["chapters"].append(rec)
                sl = [c for c in rec["controls"] if c["kind"] == "slider"]
                print(f"{nb.name}: ran in {rec.get('run_all_s')} s, {len(sl)} sliders "
                      f"(medians {[c['median_ms'] for c in sl]} ms), {len(rec['controls']) - len(sl)} Play, "
                      f"{rec['wall_s']} s, load {_load()}, errors {rec.get('errors')}", flush=True)
                try:
                    lab.shutdown_kernels(base, token)
                except OSError:
                    pass
            browser.close()
    finally:
        lab.stop_lab(proc)
    data["load_average_at_end"] = _load()
    data["wall_s"] = round(time.monotonic() - t_start)
    data["summary"] = summarize(data)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(data, indent=1) + "\n")
    (out / f"{name}.md").write_text(markdown(data))
    plot(data, args.figure)
    print(markdown(data))
    print(f"wrote {out / name}.json, .md and {args.figure} in {data['wall_s']} s")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
