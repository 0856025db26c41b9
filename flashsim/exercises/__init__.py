"""flashsim.exercises: one module per chapter (`ch05.py` for chapter 05); every public name is re-exported here.

The course's notebooks call `flashsim.exercises.<name>`; modules import matplotlib / ipywidgets lazily, inside
functions, so `import flashsim.exercises` works on a GPU machine without Jupyter.
"""
from .._reexport import reexport_submodules

__all__ = reexport_submodules(__name__, globals())
