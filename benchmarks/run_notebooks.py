"""Run every chapter top to bottom at a chosen size and record the wall time of each (issue: the course runs at
full size on a GPU, too).

Where Jupyter is installed (nbclient + ipykernel), each notebook runs in a fresh kernel exactly as nbmake runs it.
Where it is not (the lent H200 image has no Jupyter), ``--plain`` executes the notebook's code cells in order in a
fresh Python namespace: IPython magics (`%matplotlib inline`) are skipped and ``display`` prints; the widgets'
``show()`` then falls back to static figures (flashsim.course.kit.dashboard.Dashboard.show). Both ways stop at the first
error and report it.

    FLASHSIM_SIZE=full PYTHONPATH=$PWD python benchmarks/run_notebooks.py --plain --out results.json

The JSON holds, under "results", one record per notebook: {"notebook", "wall_s", "size", "device", "method", "ok",
"error"}, which ``make figures`` draws as figures/notebook_wall_times.png; under "info", what the run ran on
(:func:`flashsim.measure.provenance.run_info`: versions of torch and triton, GPU, driver), or only the Python version
where torch or triton is missing.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from flashsim.course.kit.notebook_exec import run_plain  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _device_name() -> str:
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    except Exception:  # noqa: BLE001 - report the CPU when torch is missing or broken
        pass
    return f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"


def _info(command: str) -> dict:
    """The run's provenance (versions, GPU, date, command); without torch or triton, the Python version alone."""
    try:
        from flashsim.measure.provenance import run_info

        return run_info(command)
    except ImportError:
        return {"python": platform.python_version(), "command": command}


def run_kernel(path: Path, timeout_s: int) -> None:
    """Execute `path` in a fresh Jupyter kernel (what nbmake does)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=timeout_s, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", help="notebooks to run (default: every notebooks/NN_*.ipynb)")
    parser.add_argument("--plain", action="store_true", help="run code cells as plain Python (no Jupyter)")
    parser.add_argument("--timeout", type=int, default=1800, help="per-notebook timeout with Jupyter, seconds")
    parser.add_argument("--out", default=None, help="JSON file to write")
    args = parser.parse_args(argv)

    paths = [Path(p) for p in args.notebooks] or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    size = os.environ.get("FLASHSIM_SIZE", "full") or "full"
    device = _device_name()
    method = "plain Python (code cells in order)" if args.plain else "nbclient (fresh Jupyter kernel)"
    command = " ".join([Path(sys.executable).name, *sys.argv])
    info = _info(command) if args.out else None
    records = []
    for path in paths:
        start = time.perf_counter()
        error = None
        try:
            run_plain(path) if args.plain else run_kernel(path.resolve(), args.timeout)
        except Exception:  # noqa: BLE001 - record the failure and go on with the next chapter
            error = traceback.format_exc(limit=3)[-1500:]
        wall_s = time.perf_counter() - start
        records.append({"notebook": path.name, "wall_s": round(wall_s, 2), "size": size, "device": device,
                        "method": method, "ok": error is None, "error": error})
        print(f"{path.name:32s} {'ok ' if error is None else 'ERR'} {wall_s:7.1f} s", flush=True)
        if args.out:  # after every notebook, so a run cut short still leaves its records
            result = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                      "command": command, "python": platform.python_version(), "info": info,
                      "results": records}
            Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"\n{sum(r['ok'] for r in records)}/{len(records)} notebooks ran ({size} size, {device}, {method})")
    return 0 if all(r["ok"] for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
