"""Closed forms: exact byte counts of every algorithm, and the roofline time model (chapters 02, 05, 09).

The simulator's counters (step mode and count mode) are tested to equal these formulas exactly.
"""
