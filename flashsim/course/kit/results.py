"""Recorded GPU and CPU results that the course shows, read as package data (chapters 06, 09, 10, 12 and 13).

``benchmarks/results/`` (and ``benchmarks/experiments/``) stay the raw, dated record of every GPU run. The course
shows a curated, named set of them: byte-exact copies under ``flashsim/course/recorded/``, shipped inside the wheel
and read through :mod:`importlib.resources`, so a chapter shows the same numbers in an editable checkout, a wheel
install and a machine that never saw ``benchmarks/``. ``recorded/manifest.json`` says which raw file each copy came
from; a test checks that no copy drifts from its source, and ``--sync`` refreshes them::

    from flashsim.course.kit.results import load_result
    load_result("kernels_h200")["ncu_sweep"]          # the ncu sweep on the H200 (chapter 09)

    python -m flashsim.course.kit.results --list     # name -> raw source
    python -m flashsim.course.kit.results --check    # exit 1 if a copy differs from its source (a checkout)
    python -m flashsim.course.kit.results --sync     # copy the manifest's sources over the copies (a checkout)

To show a newer run: commit it under ``benchmarks/results/``, point the manifest's entry at it, run ``--sync``.
"""
from __future__ import annotations

import argparse
import json
import sys
from importlib.resources import files
from pathlib import Path

from flashsim.errors import FlashsimError

__all__ = ["load_result", "run_provenance", "provenance_label", "measured_on_label", "recorded_names", "result_source",
           "drift", "sync", "main"]

_MANIFEST = "manifest.json"


def _recorded():
    """The folder of the copies inside the installed package (a data folder, not a package)."""
    return files("flashsim.course") / "recorded"


def _manifest() -> dict[str, dict]:
    """{name: {"source": repo-relative raw file, "shown_in": ..., "what": ...}} from recorded/manifest.json."""
    return json.loads((_recorded() / _MANIFEST).read_text(encoding="utf-8"))["results"]


def _name(name: str) -> str:
    name = str(name).removesuffix(".json")
    if name not in _manifest():
        raise FlashsimError(f"no recorded result {name!r}: the course records {', '.join(recorded_names())} "
                            f"(flashsim/course/recorded/{_MANIFEST})")
    return name


def recorded_names() -> tuple[str, ...]:
    """Every recorded result's name, sorted (what :func:`load_result` accepts)."""
    return tuple(sorted(_manifest()))


def result_source(name: str) -> str:
    """The raw file the copy `name` came from, relative to the repository root, e.g.
    ``"benchmarks/results/kernels_h200_<date>.json"`` (what a chapter cites)."""
    return _manifest()[_name(name)]["source"]


def load_result(name: str):
    """The recorded result `name` (``"kernels_h200"`` or ``"kernels_h200.json"``), parsed from its JSON copy.

    The same in every install; an unknown name raises :class:`FlashsimError` listing the recorded names."""
    return json.loads((_recorded() / f"{_name(name)}.json").read_text(encoding="utf-8"))


# --- keeping the copies equal to the raw record (a repository checkout only) -----------------------------------

def _meta(data: dict) -> dict:
    """A run's metadata block: ``versions`` or ``info`` (whichever the benchmark wrote), else {}."""
    return next((data[k] for k in ("versions", "info") if isinstance(data.get(k), dict)), {})


def run_provenance(data: dict) -> tuple:
    """(gpu, date) a recorded run names in its own metadata: ``versions`` or ``info`` (``gpu``, else the first of
    ``gpus``, a ``device`` entry's name), else the top level's ``device``/``gpu``; the date (``date_utc``/``date``)
    as YYYY-MM-DD. Either is None or "" where the run does not say. The one reader of a run's provenance, for every
    "measured on <GPU>, <date>" label."""
    meta = _meta(data)
    gpus = meta.get("gpus") or []
    gpu = meta.get("gpu") or data.get("device") or data.get("gpu") or (gpus[0] if gpus else None)
    if isinstance(gpu, dict):
        gpu = gpu.get("device")
    date = str(meta.get("date_utc") or data.get("date_utc") or data.get("date") or "")[:10]
    return gpu, date


def provenance_label(data: dict) -> str:
    """"<GPU>, <date>" of a recorded run, from :func:`run_provenance`: several GPUs as "<count> × <GPU>", a run
    with no GPU by its machine's processor, "a GPU" and no date where the run does not say. The one label of where
    and when a run's numbers were measured (figure titles, tables, :func:`flashsim.course.kit.real_gpu.measured_on`)."""
    gpu, date = run_provenance(data)
    gpus = _meta(data).get("gpus") or []
    if not gpu:
        machine = data.get("machine")
        gpu = (machine.get("cpu") or machine.get("processor")) if isinstance(machine, dict) else machine
    where = f"{len(gpus)} × {gpus[0]}" if len(gpus) > 1 else str(gpu or "a GPU")
    return f"{where}, {date}" if date else where


def measured_on_label(data: dict) -> str:
    """"measured on <GPU>, <date>" (with "an" before a GPU's name), from :func:`provenance_label`: the sentence form
    a chapter prints next to a recorded number."""
    label = provenance_label(data)
    return f"measured on {'an ' if label.startswith('NVIDIA') else ''}{label}"


def _checkout(root) -> tuple[Path, Path]:
    """(repository root, recorded folder) of a source checkout; a wheel install has no benchmarks/ to copy from."""
    recorded = Path(str(_recorded()))
    root = Path(root) if root is not None else recorded.parents[2]
    if not (root / "benchmarks").is_dir():
        raise FlashsimError(f"{root} has no benchmarks/ folder: syncing the recorded results needs a checkout of "
                            f"the repository (pass root=...)")
    return root, recorded


def drift(root=None) -> list[str]:
    """Names whose recorded copy is missing or differs byte for byte from its raw source (raises when a source is
    missing)."""
    root, recorded = _checkout(root)
    out = []
    for name in recorded_names():
        source = root / result_source(name)
        if not source.is_file():
            raise FlashsimError(f"{name}: its source {source} is not there: fix recorded/{_MANIFEST}")
        copy = recorded / f"{name}.json"
        if not copy.is_file() or copy.read_bytes() != source.read_bytes():
            out.append(name)
    return out


def sync(root=None) -> list[str]:
    """Copy every source named in the manifest over its recorded copy; returns the names that changed."""
    root, recorded = _checkout(root)
    changed = drift(root)
    for name in changed:
        (recorded / f"{name}.json").write_bytes((root / result_source(name)).read_bytes())
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flashsim.course.kit.results",
                                     description="The recorded GPU results the course shows (package data).")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--list", action="store_true", help="name -> raw source (the default)")
    group.add_argument("--check", action="store_true", help="exit 1 if a copy differs from its source")
    group.add_argument("--sync", action="store_true", help="copy the sources over the copies")
    parser.add_argument("--root", default=None, help="repository root (default: this checkout)")
    args = parser.parse_args(argv)
    if args.sync:
        changed = sync(args.root)
        print(f"updated {', '.join(changed)}" if changed else "every recorded copy equals its source")
        return 0
    if args.check:
        changed = drift(args.root)
        print(f"differ from their sources: {', '.join(changed)} (run --sync)" if changed
              else "every recorded copy equals its source")
        return 1 if changed else 0
    for name in recorded_names():
        print(f"{name:<28} {result_source(name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
