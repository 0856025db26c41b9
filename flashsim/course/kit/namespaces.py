"""The chapter packages, in order: what ``make figures``, the progress table and ``tools/gen_namespaces.py`` (which
writes the flat namespaces ``flashsim.widgets``, ``.plots`` and ``.exercises`` as explicit imports) walk over.

Each chapter keeps its code in ``flashsim/course/chNN/`` (``dashboards.py``, ``figures.py``, ``checks.py``).
"""
from __future__ import annotations

import pkgutil

import flashsim.course as course


def chapters() -> list[str]:
    """The chapter packages, in order: ``["ch00", "ch01", ...]``."""
    return sorted(m.name for m in pkgutil.iter_modules(course.__path__) if m.name.startswith("ch") and m.ispkg)
