"""The flat namespaces the notebooks use: ``flashsim.widgets``, ``.plots`` and ``.exercises``.

Each chapter keeps its code in ``flashsim/course/chNN/`` (``dashboards.py``, ``figures.py``, ``checks.py``); a
notebook writes ``widgets.show_x()`` rather than ``flashsim.course.ch05.dashboards.show_x()``. The namespace
collects the names in each chapter module's ``__all__``.
"""
from __future__ import annotations

import importlib
import pkgutil

import flashsim.course as course


def chapters() -> list[str]:
    """The chapter packages, in order: ``["ch00", "ch01", ...]``."""
    return sorted(m.name for m in pkgutil.iter_modules(course.__path__) if m.name.startswith("ch") and m.ispkg)


def reexport_chapters(kind: str, namespace: dict) -> list[str]:
    """Copy the names in ``flashsim.course.chNN.<kind>.__all__`` of every chapter into `namespace`.

    Two chapters exporting the same name is a bug: it raises instead of silently shadowing one of them.
    """
    exported: dict[str, str] = {}
    for ch in chapters():
        try:
            module = importlib.import_module(f"flashsim.course.{ch}.{kind}")
        except ModuleNotFoundError as e:
            if e.name == f"flashsim.course.{ch}.{kind}":
                continue  # this chapter has no module of this kind
            raise
        for name in getattr(module, "__all__", []):
            if name in exported:
                raise ImportError(f"flashsim.course: {name!r} is exported by both {exported[name]} and "
                                  f"{ch}.{kind}")
            exported[name] = f"{ch}.{kind}"
            namespace[name] = getattr(module, name)
    return sorted(exported)
