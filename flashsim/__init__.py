"""flashsim: FlashAttention on a simulated GPU memory hierarchy, with every byte counted.

>>> import flashsim
>>> flashsim.traffic("flash2", n=4096, d=64).hbm_bytes < flashsim.traffic("naive", n=4096, d=64).hbm_bytes
True

Public names: :func:`traffic` (count mode: bytes, FLOPs, roofline time), :func:`simulate` (step mode: numbers and
their error against float64), :func:`get_device` (hardware presets), :func:`make_problem` (argument
validation), :func:`progress` (the exercises you have passed, chapters × exercises) and the errors. Importing
flashsim stays light: numpy only, no torch, triton or ipywidgets (``progress`` loads the course when first used).
"""
from flashsim.model.simulator import Simulation, Traffic, simulate, traffic
from flashsim.errors import FlashsimError, FlashsimWarning, MemoryBudgetError, SramCapacityError
from flashsim.model.hardware import Hardware, get_device
from flashsim.model.problem import make_problem

__version__ = "0.1.0"

__all__ = ["traffic", "simulate", "Traffic", "Simulation", "get_device", "Hardware", "make_problem", "progress",
           "FlashsimError", "FlashsimWarning", "MemoryBudgetError", "SramCapacityError", "__version__"]


def __getattr__(name: str):
    """``flashsim.progress``: the course layer, loaded on first use so that ``import flashsim`` stays numpy-only
    (the course sits above the simulator and may import torch to decide where its kernels run)."""
    if name == "progress":
        from flashsim.course.kit.progress import progress
        return progress
    raise AttributeError(f"module 'flashsim' has no attribute {name!r}")
