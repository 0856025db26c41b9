"""``python -m flashsim.measure``: the ncu child process (``--child SPEC``), or the ``flashsim measure`` CLI."""
import argparse
import sys

from flashsim.measure.child import run_child
from flashsim.measure.cli import add_measure_arguments, run_measure

if len(sys.argv) == 3 and sys.argv[1] == "--child":
    run_child(sys.argv[2])
else:
    p = argparse.ArgumentParser(prog="python -m flashsim.measure")
    add_measure_arguments(p)
    sys.exit(run_measure(p.parse_args()))
