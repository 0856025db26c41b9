"""flashsim.solutions: worked solutions of the course's exercises, one module per chapter (``ch03.py`` for 03).

The notebooks never import these; a learner who is stuck may (``from flashsim.solutions.ch03 import ...``). The
tests run every checker of :mod:`flashsim.exercises` on these solutions, and on a plausible wrong answer it must
reject.
"""
