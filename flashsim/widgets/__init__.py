"""flashsim.widgets: one module per chapter (`ch05.py` for chapter 05); every public name is re-exported here.

The course's notebooks call `flashsim.widgets.<name>`; modules import matplotlib / ipywidgets lazily, inside
functions, so `import flashsim.widgets` works on a GPU machine without Jupyter.
"""
from .._reexport import reexport_submodules

__all__ = reexport_submodules(__name__, globals())
