"""flashsim.plots: every chapter's `figures` (`flashsim/course/chNN/figures.py`), in one flat namespace for the notebooks."""
from flashsim.course.kit.namespaces import reexport_chapters

__all__ = reexport_chapters("figures", globals())
