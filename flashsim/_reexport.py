"""Re-export the public names of every submodule of a package (used by widgets, plots, exercises)."""
from __future__ import annotations

import importlib
import pkgutil


def reexport_submodules(package_name: str, namespace: dict) -> list[str]:
    """Import each submodule of `package_name` and copy the names in its ``__all__`` into `namespace`.

    Two submodules exporting the same name is a bug: it raises instead of silently shadowing one of them.
    """
    package = importlib.import_module(package_name)
    exported: dict[str, str] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package_name}.{info.name}")
        for name in getattr(module, "__all__", []):
            if name in exported:
                raise ImportError(f"{package_name}: {name!r} is exported by both {exported[name]} and {info.name}")
            exported[name] = info.name
            namespace[name] = getattr(module, name)
    return sorted(exported)
