"""Run a chapter's code cells as plain Python, without Jupyter (course plumbing, chapter 00).

Used by ``benchmarks/run_notebooks.py --plain`` (the GPU machine has no Jupyter) and by the test that re-running
any cell leaves a notebook consistent (``tests/test_notebooks_rerun.py``): with ``repeat=2`` every cell runs twice
in a row before the next one, as a learner who presses Shift-Enter twice would.

IPython magics (``%matplotlib inline``) and shell lines (``!pip ...``) are skipped; ``display`` prints; matplotlib
draws off screen. The widgets' ``show()`` methods still build their controls when ipywidgets is installed, and fall
back to static figures where it is not.
"""
from __future__ import annotations

import contextlib
import io
import json
import linecache
import os
from pathlib import Path


def code_cells(path) -> list[str]:
    """The source of each code cell of the notebook at `path`, magics and shell lines removed."""
    cells = json.loads(Path(path).read_text())["cells"]
    out = []
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        lines = "".join(cell["source"]).splitlines()
        out.append("\n".join(ln for ln in lines if not ln.lstrip().startswith(("%", "!"))))
    return out


def compile_cell(source: str, filename: str):
    """compile() a cell as IPython does: its source is registered in :mod:`linecache` under ``filename``, so that
    ``inspect.getsource`` finds the functions it defines. Triton's compiled (GPU) ``@triton.jit`` needs that: it
    reads the function's source, and without it refuses with "@jit functions should be defined in a Python file".
    """
    # mtime None: linecache.checkcache keeps the entry (there is no file on disk to compare it with)
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    return compile(source, filename, "exec")


def run_plain(path, repeat: int = 1, quiet: bool = False) -> dict:
    """Execute the notebook's code cells in order in one fresh namespace, each `repeat` times; return it.

    An exception propagates with the cell's index in its traceback's file name ("NN_name.ipynb[cell 7]").
    quiet=True swallows what the cells print.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path).resolve()
    namespace = {"__name__": "__main__", "display": lambda *objs, **_: print(*objs)}
    cwd = os.getcwd()
    os.chdir(path.parent)
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink) if quiet else contextlib.nullcontext():
            for index, source in enumerate(code_cells(path)):
                code = compile_cell(source, f"{path.name}[cell {index}]")
                for _ in range(repeat):
                    exec(code, namespace)  # noqa: S102 - the course's own notebooks
                    plt.close("all")
    finally:
        os.chdir(cwd)
    return namespace
