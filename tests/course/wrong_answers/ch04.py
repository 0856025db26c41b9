"""Wrong answers learners write for chapter 04, each with the diagnosis its checker must give."""
import math

import numpy as np


def update_no_rescale(m, l, block):
    m_new = max(m, max(block))
    return m_new, l + sum(math.exp(x - m_new) for x in block)


def update_no_max(m, l, block):
    return max(m, max(block)), l + sum(math.exp(x) for x in block)


def update_stub(m, l, block):
    raise NotImplementedError


def merge_no_rescale(a, b):
    return max(a[0], b[0]), a[1] + b[1]


def merge_one_side(a, b):
    m = max(a[0], b[0])
    return m, a[1] * math.exp(a[0] - m) + b[1]


def merge_min(a, b):
    m = min(a[0], b[0])
    return m, a[1] + b[1]


def softmax_no_max(x):
    e = np.exp(x)
    return e / e.sum()


def softmax_upcast(x):
    x = x.astype(np.float32)
    e = np.exp(x - x.max())
    return e / e.sum()


def softmax_by_max(x):
    e = np.exp(x - x.max())
    return e / e.max()


CATALOGUE = [
    ("04.1", update_no_rescale, "missing_rescale"),
    ("04.1", update_no_max, "no_max_subtraction"),
    ("04.1", update_stub, "not_implemented"),
    ("04.2", merge_no_rescale, "missing_rescale"),
    ("04.2", merge_one_side, "one_side_rescaled"),
    ("04.2", merge_min, "non_finite"),      # (-inf, 0) merged with a real part stays -inf
    ("04.3", softmax_no_max, "non_finite"),
    ("04.3", softmax_upcast, "wrong_type"),
    ("04.3", softmax_by_max, "normalised_by_max"),
]
