"""The course: a small kit every chapter shares (:mod:`.kit`) and one folder per chapter (``ch00/``, ``ch01/``, ...,
each with ``dashboards.py``, ``figures.py`` and ``checks.py``; :func:`flashsim.course.kit.namespaces.chapters` lists
them).

Notebooks reach the chapters through the flat namespaces :mod:`flashsim.widgets`, :mod:`flashsim.plots` and
:mod:`flashsim.exercises`, and the sizes and the device report through this package::

    from flashsim.course import pick, size
    n = pick(small=256, full=8192)          # 256 in CI (FLASHSIM_SIZE=small), 8192 otherwise
"""
from flashsim.course.kit.report import (COURSE_MAP, ENV_VAR, DeviceReport, Table, course_map, device_report,
                                        is_small, pick, size)

__all__ = ["ENV_VAR", "size", "is_small", "pick", "device_report", "DeviceReport", "Table", "COURSE_MAP",
           "course_map"]
