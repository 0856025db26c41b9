"""flashsim.solutions: worked solutions of the course's exercises, one module per chapter (``ch03.py`` for 03).

Nothing in the package imports these (import-linter's ``solutions-closed`` contract): a learner opens one with
``exercises.reveal("03.1")`` (:mod:`flashsim.course.kit.reveal`), which finds the functions through each module's
``SOLUTIONS`` table. The tests run every checker on its solution (it must pass) and on the catalogue of wrong
answers in ``tests/course/wrong_answers/`` (each must get its diagnosis).
"""
