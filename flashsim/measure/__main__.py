"""``python -m flashsim.measure``: the ncu child process (``--child SPEC``), or the ``flashsim measure`` CLI."""
import sys

from flashsim.measure import _child, add_measure_arguments, run_measure

if len(sys.argv) == 3 and sys.argv[1] == "--child":
    _child(sys.argv[2])
else:
    import argparse
    p = argparse.ArgumentParser(prog="python -m flashsim.measure")
    add_measure_arguments(p)
    sys.exit(run_measure(p.parse_args()))
