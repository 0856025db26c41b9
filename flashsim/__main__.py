"""``python -m flashsim``: the same command as ``flashsim`` (see :mod:`flashsim.cli`)."""
import sys

from flashsim.cli import main

sys.exit(main())
