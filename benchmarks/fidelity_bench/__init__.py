"""The parts of benchmarks/fidelity_h200.py (the fidelity of the kernel view and the L2 model on the H200 against
Nsight Compute), one concern per module: :mod:`.configs` (the kernels, their configurations and sets, the
predictions, the ncu batches and the device-time estimate), :mod:`.writeback` (the write-back measurement: its
method, the child process ncu profiles, the probe, ``--rederive``), :mod:`.compare` (the DRAM criterion, rows per
launch, ``--recompare``, the summary, ``--merge``), :mod:`.report` (the markdown) and :mod:`.sweep` (the run).
The command line is fidelity_h200.py's."""
