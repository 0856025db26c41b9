"""Write a results file as a table: one record per line.

``json.dump(..., indent=1)`` puts every number of a results file on its own line, so a run of a few hundred rows
becomes tens of thousands of lines. This writer keeps the same data (``json.loads`` of its output equals the input)
and lays it out as a reader scans it: a list of objects (the rows of a table) gets one object per line, and any
other container that fits in ``WIDTH`` characters is written on one line.

    python tools/compact_json.py benchmarks/results/*.json          # rewrite in place
    python tools/compact_json.py --check benchmarks/results/*.json  # exit 1 if a file would change
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

WIDTH = 118


def dumps(obj, indent: int = 0, width: int = WIDTH, record: bool = False) -> str:
    """``obj`` as JSON: on one line if it is a ``record`` (an item of a list of objects) or fits in ``width``
    from ``indent``, else one member per line."""
    flat = json.dumps(obj, ensure_ascii=False)
    if not isinstance(obj, (dict, list)) or not obj or record or indent + len(flat) <= width:
        return flat
    pad = " " * (indent + 1)
    if isinstance(obj, dict):
        items = [f"{pad}{json.dumps(k, ensure_ascii=False)}: {dumps(v, indent + 1, width)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    table = all(isinstance(v, dict) for v in obj)
    items = [pad + dumps(v, indent + 1, width, record=table) for v in obj]
    return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"


def rewrite(path: Path, check: bool = False) -> bool:
    """Rewrite ``path`` compactly (the same data); True if its text changes."""
    text = path.read_text()
    data = json.loads(text)
    new = dumps(data) + "\n"
    if json.loads(new) != data:
        raise AssertionError(f"{path}: the compact text does not read back equal")
    if new == text:
        return False
    if not check:
        path.write_text(new)
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", type=Path)
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a file is not compact")
    args = ap.parse_args(argv)
    changed = [p for p in args.paths if rewrite(p, args.check)]
    for p in changed:
        print(("not compact: " if args.check else "rewrote ") + str(p))
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
