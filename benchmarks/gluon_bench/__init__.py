"""The parts of benchmarks/gluon_validate.py (the Gluon kernels' correctness grid and same-run timing on a Hopper
GPU), one concern per module: :mod:`.loading` (the kernels and versions), :mod:`.checks` (correctness against the
float64 reference), :mod:`.timing` (do_bench in interleaved rounds, or every kernel once per iteration with each
call timed), :mod:`.forward` and :mod:`.backward` (their tuning candidates, timed rows and, for ``--bwd``, the run
itself), :mod:`.fa4` (FlashAttention-4 as the reference column). The command line is gluon_validate.py's.
:mod:`.stalls` has a command of its own: where a launch profiled by ncu waits, its idle warps set apart."""
