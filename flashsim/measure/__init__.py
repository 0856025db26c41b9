"""Measuring the real kernels' IO, to compare with the simulator's kernel view (chapters 05-09).

One concern per module, the public names re-exported here:

* :mod:`~flashsim.measure.interp` — :func:`count_io` (interpreter): hooks the Triton interpreter's loads and
  stores and counts the bytes each touches, per launch and per tensor;
* :mod:`~flashsim.measure.inputs`, :mod:`~flashsim.measure.runners` — :func:`make_inputs`, :func:`kernel_runner`:
  one kernel call by its CLI name on fixed random inputs;
* :mod:`~flashsim.measure.timing` — :func:`bench`: the median time of a call;
* :mod:`~flashsim.measure.ncu` — :func:`ncu_profile`, :func:`ncu_profile_batch`, :func:`ncu_profile_script`
  (GPU): Nsight Compute counters in a child process (:mod:`~flashsim.measure.child`), with :func:`timing_estimate` as the fallback;
* :mod:`~flashsim.measure.device` — :func:`device_hardware`: the preset of the GPU this runs on;
* :mod:`~flashsim.measure.cli` — :func:`measure_cli_result`, :func:`add_measure_arguments`, :func:`run_measure`:
  the ``flashsim measure`` CLI;
* :mod:`~flashsim.measure.correctness` — :func:`attention_vs_torch` (GPU): the one GPU correctness check of the
  kernels (outputs and gradients finite and within twice torch SDPA's error against the float64 reference);
* :mod:`~flashsim.measure.peak_memory`, :mod:`~flashsim.measure.provenance`: peak memory of a call, and what a
  measurement ran on.

Importing it needs neither torch nor triton; calls that need them raise a FlashsimError naming the install.
"""
from __future__ import annotations

from flashsim.measure.child import run_child
from flashsim.measure.cli import add_measure_arguments, measure_cli_result, run_measure
from flashsim.measure.device import device_hardware, simulated_hardware
from flashsim.measure.inputs import make_inputs
from flashsim.measure.interp import IOCount, count_io
from flashsim.measure.ncu import (LAUNCH_METRICS, NCU_METRICS, REQUIRED_METRICS, ncu_profile, ncu_profile_batch,
                                  ncu_profile_script, timing_estimate)
from flashsim.measure.runners import KERNEL_FUNCTIONS, kernel_runner
from flashsim.measure.timing import bench

_child = run_child          # the name the ncu child entry point had

__all__ = ["IOCount", "count_io", "make_inputs", "kernel_runner", "KERNEL_FUNCTIONS", "bench", "ncu_profile",
           "ncu_profile_batch", "ncu_profile_script", "timing_estimate", "NCU_METRICS", "LAUNCH_METRICS", "REQUIRED_METRICS",
           "device_hardware", "simulated_hardware", "measure_cli_result", "add_measure_arguments", "run_measure", "run_child"]
