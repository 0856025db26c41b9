"""The learner's progress: which exercises have passed, remembered across sessions (a small JSON file).

The file is ``progress.json`` in the user's data directory (``platformdirs.user_data_dir("flashsim")``), or in
the directory ``FLASHSIM_DATA_DIR`` names (tests and CI point it at a temporary directory). It is written
atomically (a temporary file in the same directory, then ``os.replace``), so a kernel killed mid-write leaves
the previous file intact, and read afresh on every call, so it survives a kernel restart. A checker's pass is
recorded by :func:`flashsim.course.kit.checker.verdict`; :func:`progress` shows chapters × exercises.
"""
from __future__ import annotations

import importlib
import json
import os
import tempfile
import time
from pathlib import Path

from flashsim.course.kit.namespaces import chapters
from flashsim.model.table import Table

__all__ = ["DATA_DIR_ENV", "data_dir", "progress_path", "register", "record", "passed", "progress", "reset"]

#: environment variable overriding the data directory (tests, CI)
DATA_DIR_ENV = "FLASHSIM_DATA_DIR"
_FILE = "progress.json"
#: {exercise id: title} of every exercise declared so far (:func:`flashsim.course.kit.checker.exercise` registers)
_COURSE: dict[str, str] = {}


def register(exercise_id: str, title: str) -> None:
    """Add an exercise to the course's list (each chapter's checks do it through ``checker.exercise``)."""
    _COURSE[exercise_id] = title


def data_dir() -> Path:
    """Where flashsim keeps the learner's data: $FLASHSIM_DATA_DIR, else platformdirs' user data directory."""
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        return Path(env)
    try:
        import platformdirs
    except ImportError:  # a base install without platformdirs: the XDG default
        return Path(os.environ.get("XDG_DATA_HOME", Path.home() / ".local" / "share")) / "flashsim"
    return Path(platformdirs.user_data_dir("flashsim", appauthor=False))


def progress_path() -> Path:
    return data_dir() / _FILE


def _load() -> dict:
    try:
        data = json.loads(progress_path().read_text())
    except (OSError, ValueError):
        return {"passed": {}}
    return data if isinstance(data, dict) and isinstance(data.get("passed"), dict) else {"passed": {}}


def _save(data: dict) -> None:
    path = progress_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".progress-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def record(exercise_id: str) -> None:
    """Remember that `exercise_id` passed (the first time, with its UTC date). Never raises: a read-only home
    directory costs the record, not the verdict."""
    try:
        data = _load()
        if exercise_id not in data["passed"]:
            data["passed"][exercise_id] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            _save(data)
    except OSError:
        pass


def passed() -> dict[str, str]:
    """{exercise id: when it first passed} from the progress file."""
    return dict(_load()["passed"])


def reset() -> None:
    """Forget every pass (the file is rewritten empty)."""
    _save({"passed": {}})


def _order(exercise_id: str) -> tuple:
    return tuple(int(p) for p in exercise_id.split("."))


def progress(quiet: bool = True) -> Table:
    """A table of chapters × exercises, ✔ passed and · not yet, read from the progress file (chapter 00 and the
    end of every chapter show it; a notebook displays the returned Table). Prints it unless `quiet`.

    Every chapter's ``checks`` module is loaded first (by name, like the flat namespaces), so the table lists the
    whole course whichever chapter's notebook asks.
    """
    for ch in chapters():
        try:
            importlib.import_module(f"flashsim.course.{ch}.checks")
        except ModuleNotFoundError as e:
            if e.name != f"flashsim.course.{ch}.checks":
                raise                      # a real missing dependency, not a chapter without exercises
    done = passed()
    by_chapter: dict[str, list[str]] = {}
    for ex_id in sorted(_COURSE, key=_order):
        by_chapter.setdefault(ex_id.split(".")[0], []).append(ex_id)
    width = max((len(v) for v in by_chapter.values()), default=0)
    rows = []
    for ch, ids in sorted(by_chapter.items()):
        marks = [f"{'✔' if i in done else '·'} {i}" for i in ids]
        rows.append([ch, *marks, *[""] * (width - len(marks)), f"{sum(i in done for i in ids)}/{len(ids)}"])
    n_done = sum(i in done for i in _COURSE)
    table = Table(["chapter", *[f"exercise {k + 1}" for k in range(width)], "passed"], rows,
                  caption=f"Your progress: {n_done} of {len(_COURSE)} exercises passed (✔ passed, · not yet)")
    if not quiet:
        print(table)
    return table
