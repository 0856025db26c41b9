"""What a course section needs beyond the base package and ``[lab]``, and the one line it prints when that is missing.

Every chapter runs to its end with only ``pip install "flashsim[lab]"``: a section that needs an optional extra asks
here first, and where the extra is missing it prints one line (what is missing, how to install it) and shows the
recorded measurements instead (:mod:`flashsim.course.kit.real_gpu`, :mod:`flashsim.course.kit.results`)::

    from flashsim.course.kit.optional import missing, require
    why = missing("kernels")    # None, or: 'torch and triton are not installed: ... pip install "flashsim[kernels]"'
    if why:
        print(why)              # then show the recorded result
    require("cpu")              # raises MissingExtra (an ImportError and a FlashsimError) carrying that line

Nothing is imported to find out (``importlib.util.find_spec``): importing triton before :mod:`flashsim.kernels`
decides ``TRITON_INTERPRET`` would break the interpreter, and torch takes seconds to import. The one definition
sits in :mod:`flashsim.errors`, below every layer, so that the kernels' backend, the CPU kernel and ring attention
name a missing extra with the same line; this module is the course's door to it.
"""
from __future__ import annotations

from flashsim.errors import EXTRAS, MissingExtra, absent, missing, require

__all__ = ["EXTRAS", "MissingExtra", "absent", "missing", "require"]
