"""Regenerate every file in ``figures/`` from code: ``python -m flashsim.course.figures`` (``make figures``).

Convention (for every chapter author)
-------------------------------------
A figure is a function with no required arguments whose name starts with ``figure_`` and whose docstring's first
line is the file it writes, relative to the repository root (a ``figure_*`` function that needs arguments, such as
a ``figure_to_png(fig)`` helper, is not a figure and is ignored)::

    # flashsim/course/ch02/figures.py
    def figure_traffic_vs_n() -> Figure:
        \"\"\"figures/traffic_vs_n.png\"\"\"
        return plot_traffic_vs_n(...)

This module discovers them: it imports every submodule of :mod:`flashsim.plots` (``ch00.py`` ... ``ch12.py``) and
collects its ``figure_*`` functions, plus the ``figure_*`` functions defined here (figures drawn from benchmark
JSON results under ``benchmarks/results/``, by :mod:`flashsim.course.result_figures`, which the benchmark scripts'
``--plot`` use too: such a function takes a ``path`` keyword and writes the file itself). Nothing has to be registered by hand and ``figure_*`` functions need
not be in ``__all__``. A function may return ``None`` to say "nothing to draw" (e.g. a benchmark result that is
not there yet); it is then reported as skipped, not as an error. Two functions naming the same file is an error.

The README and the chapters use these files; the notebooks draw their figures live from the same plot functions.

Command line::

    python -m flashsim.course.figures            # regenerate all
    python -m flashsim.course.figures --list     # list name -> file, draw nothing
    python -m flashsim.course.figures traffic_vs_n roofline   # only these (name with or without "figure_")
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from flashsim.course import result_figures
from flashsim.course.kit.namespaces import chapters

__all__ = ["FigureSpec", "registry", "render", "main", "ROOT"]

#: repository root (figures/ and benchmarks/ live here)
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class FigureSpec:
    name: str          # "traffic_vs_n" (function name without "figure_")
    path: str          # "figures/traffic_vs_n.png", relative to the repository root
    module: str        # where the function lives
    func: Callable


def _spec_of(module_name: str, func: Callable) -> FigureSpec:
    doc = inspect.getdoc(func) or ""
    first = doc.strip().splitlines()[0].strip() if doc.strip() else ""
    if not first.startswith("figures/"):
        raise ValueError(f"{module_name}.{func.__name__}: the docstring's first line must be the file it writes, "
                         f"e.g. 'figures/{func.__name__[len('figure_'):]}.png' (got {first!r})")
    return FigureSpec(func.__name__[len("figure_"):], first, "flashsim.course.figures" if module_name == "__main__" else module_name, func)


def _no_required_args(func) -> bool:
    return all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
               for p in inspect.signature(func).parameters.values())


def _figure_functions(module) -> list[Callable]:
    """``figure_*`` functions defined in `module` that take no required argument (a helper such as
    ``figure_to_png(fig)`` is not a figure)."""
    return [obj for name, obj in vars(module).items()
            if name.startswith("figure_") and inspect.isfunction(obj) and obj.__module__ == module.__name__
            and _no_required_args(obj)]


def registry() -> dict[str, FigureSpec]:
    """name -> FigureSpec for every figure function in flashsim.course.chNN.figures and in this module. Built on each call."""
    modules = [importlib.import_module(f"flashsim.course.{ch}.figures") for ch in chapters()]
    modules.append(sys.modules[__name__])
    specs: dict[str, FigureSpec] = {}
    by_path: dict[str, str] = {}
    for module in modules:
        for func in _figure_functions(module):
            spec = _spec_of(module.__name__, func)
            if spec.path in by_path:
                raise ValueError(f"{spec.path} is written by both {by_path[spec.path]} and "
                                 f"{spec.module}.{func.__name__}")
            if spec.name in specs:
                raise ValueError(f"two figure functions named figure_{spec.name}: {specs[spec.name].module} and "
                                 f"{spec.module}")
            by_path[spec.path] = f"{spec.module}.{func.__name__}"
            specs[spec.name] = spec
    return dict(sorted(specs.items()))


def render(spec: FigureSpec, root: Path = ROOT, dpi: int = 120) -> Path | None:
    """Draw one figure and save it under `root`; None when the function had nothing to draw.

    A figure function that accepts a ``path`` keyword writes the file itself (the figures of benchmark results,
    :mod:`flashsim.course.result_figures`): it is called with the output path and returns a truthy value when it
    wrote it."""
    out = Path(root) / spec.path
    out.parent.mkdir(parents=True, exist_ok=True)
    if "path" in inspect.signature(spec.func).parameters:
        return out if spec.func(path=out) else None
    fig = spec.func()
    if fig is None:
        return None
    fig.savefig(out, dpi=dpi, bbox_inches="tight", metadata={"Software": None} if out.suffix == ".png" else None)
    try:
        import matplotlib.pyplot as plt
        plt.close(fig)
    except Exception:  # pragma: no cover
        pass
    return out


# --- figures drawn from benchmark results (skipped while the results are not there) ------------------------

def _load_results(pattern: str) -> list[dict]:
    out = []
    for path in sorted((ROOT / "benchmarks" / "results").glob(pattern)):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        out.extend(data if isinstance(data, list) else data.get("cases", data.get("results", [data])))
    return [r for r in out if isinstance(r, dict)]


def _newest_result(pattern: str, need: str | None = None) -> tuple[Path, dict] | None:
    """The benchmarks/results file matching `pattern` with the latest "date" (or name), having key `need`."""
    found = []
    for path in (ROOT / "benchmarks" / "results").glob(pattern):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and (need is None or data.get(need)):
            found.append((str(data.get("date", "")), path.name, path, data))
    if not found:
        return None
    _, _, path, data = max(found, key=lambda t: (t[0], t[1]))
    return path, data


def _drawn_from_result(pattern: str, need: str, draw, path, by_path: bool = False):
    """Draw the newest benchmarks/results/<pattern> (having key `need`) with `draw`, one of
    :mod:`flashsim.course.result_figures`: ``draw(data, path)``, or ``draw(json_path, path)`` when `by_path`. None
    while there is no such result."""
    found = _newest_result(pattern, need=need)
    if found is None:
        return None
    if by_path:
        draw(str(found[0]), str(path))
    else:
        draw(found[1], path)
    return True


def figure_peak_memory_cpu(path=None):
    """figures/peak_memory_cpu.png

    From the newest benchmarks/results/cpu_peak_memory_*.json (written by benchmarks/peak_memory.py).
    """
    return _drawn_from_result("cpu_peak_memory_*.json", "cpu", result_figures.peak_memory, path)


def figure_cpu_speed(path=None):
    """figures/cpu_speed.png

    From the newest benchmarks/results/cpu_speed_*.json (written by benchmarks/cpu_speed.py).
    """
    return _drawn_from_result("cpu_speed_*.json", "speed", result_figures.cpu_speed, path)


def figure_measured_vs_simulated_h200(path=None):
    """figures/measured_vs_simulated_h200.png

    From the newest benchmarks/results/kernels_h200*.json (the ncu sweep of benchmarks/gpu_validate.py); skipped
    while that result is not there.
    """
    return _drawn_from_result("kernels_h200*.json", "ncu_sweep", result_figures.measured_vs_simulated, path,
                              by_path=True)


def figure_dashboard_latency(path=None):
    """figures/dashboard_latency.png

    From the newest benchmarks/results/dashboard_latency_*.json (key press to changed pixels in JupyterLab and
    Chromium, written by benchmarks/dashboard_latency.py).
    """
    return _drawn_from_result("dashboard_latency_*.json", "chapters", result_figures.dashboard_latency, path)


def figure_notebook_wall_times():
    """figures/notebook_wall_times.png

    Per-notebook wall time from benchmarks/results/notebooks*.json (records of {"notebook", "wall_s", "size",
    "device"}), or None when no such results exist.
    """
    rows = [r for r in _load_results("notebooks*.json") if "notebook" in r and "wall_s" in r]
    if not rows:
        return None
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 3.5))
    ax = fig.add_subplot()
    groups = sorted({f"{r.get('device', '?')} ({r.get('size', '?')})" for r in rows})
    names = sorted({r["notebook"] for r in rows})
    w = 0.8 / max(1, len(groups))
    for gi, g in enumerate(groups):
        vals = {r["notebook"]: r["wall_s"] for r in rows if f"{r.get('device', '?')} ({r.get('size', '?')})" == g}
        ax.bar([i + gi * w for i in range(len(names))], [vals.get(n, 0) for n in names], w, label=g)
    ax.set_xticks([i + 0.4 - w / 2 for i in range(len(names))], [n[:2] for n in names])
    ax.set_xlabel("chapter")
    ax.set_ylabel("wall time (s)")
    ax.set_title("Notebook run time, top to bottom")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flashsim.course.figures", description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="only these figures (default: all)")
    parser.add_argument("--list", action="store_true", help="list name -> file and exit")
    parser.add_argument("--root", default=str(ROOT), help="write under this directory (default: the repo root)")
    args = parser.parse_args(argv)
    specs = registry()
    if args.list:
        for spec in specs.values():
            print(f"{spec.name:<32} {spec.path:<44} {spec.module}")
        print(f"{len(specs)} figures")
        return 0
    wanted = [n[len("figure_"):] if n.startswith("figure_") else n for n in args.names]
    unknown = [n for n in wanted if n not in specs]
    if unknown:
        print(f"unknown figure(s) {unknown}: see --list", file=sys.stderr)
        return 2
    failed = 0
    for spec in (specs[n] for n in wanted) if wanted else specs.values():
        t0 = time.perf_counter()
        try:
            out = render(spec, Path(args.root))
        except Exception as exc:  # report every failure, then exit non-zero
            failed += 1
            print(f"FAILED  {spec.name}: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        dt = time.perf_counter() - t0
        print(f"skipped {spec.name} (nothing to draw yet)" if out is None else f"wrote   {spec.path}  ({dt:.1f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
