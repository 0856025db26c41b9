"""Solutions of chapter 04's exercises (Online softmax)."""
from __future__ import annotations

import math

import numpy as np

__all__ = ["online_update", "softmax_merge", "safe_softmax"]

#: exercise id -> the functions that solve it (what flashsim.exercises.reveal shows)
SOLUTIONS = {"04.1": ("online_update",), "04.2": ("softmax_merge",), "04.3": ("safe_softmax",)}


def online_update(m, l, block):
    """Exercise 04.1: new max, and the old sum rescaled to it plus the block's terms."""
    m_new = max(m, max(block))
    old = l * math.exp(m - m_new) if m != -math.inf else 0.0
    return m_new, old + sum(math.exp(x - m_new) for x in block)


def softmax_merge(a, b):
    """Exercise 04.2: (m_a, l_a) ⊕ (m_b, l_b)."""
    (m_a, l_a), (m_b, l_b) = a, b
    m = max(m_a, m_b)
    if m == -math.inf:
        return m, 0.0
    return m, l_a * math.exp(m_a - m) + l_b * math.exp(m_b - m)


def safe_softmax(x):
    """Exercise 04.3: subtract the max, exponentiate, normalise — all in the input's dtype (fp16)."""
    e = np.exp(x - x.max())
    return e / e.sum()
