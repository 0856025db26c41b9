"""flashsim.widgets: every chapter's `dashboards` (`flashsim/course/chNN/dashboards.py`), in one flat namespace for the notebooks."""
from flashsim.course.kit.namespaces import reexport_chapters

__all__ = reexport_chapters("dashboards", globals())
