"""The simulator: problems, hardware, the memory model and every attention algorithm, numpy only.

This layer imports no torch, triton, numba or ipywidgets (checked by import-linter, ``.importlinter``): it runs
wherever numpy does. Everything above it (kernels, measure, cpu, multi, course) may import it; it imports none
of them.

- :mod:`.problem`, :mod:`.hardware`, :mod:`.dtypes`, :mod:`.memory`, :mod:`.l2`, :mod:`.roofline`: what is
  computed, on what, and how bytes move and are counted.
- :mod:`.attention`: the attention algorithms (step mode and count mode), their closed forms and L2 traces, and
  the single definitions they share: block vocabulary and causal visibility, the reference attention, the
  online-softmax update and merge, the peak-memory model.
- :mod:`.kernel_io`: the Triton kernels' requested bytes, as the kernels issue them (the kernel view).
- :mod:`.multi`: several devices joined by links (chapter 13).
- :mod:`.simulator`: :func:`traffic` and :func:`simulate`, the two entry points ``flashsim`` exports.
- :mod:`.paper`: FA1's Fig. 2 reproduced by counting.
"""
