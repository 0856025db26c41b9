"""flashsim.exercises: every chapter's `checks` (`flashsim/course/chNN/checks.py`), in one flat namespace for the notebooks."""
from flashsim.course.kit.namespaces import reexport_chapters

__all__ = reexport_chapters("checks", globals())
