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
    """Takes the smaller max as the common one (and rescales to it)."""
    m = min(a[0], b[0])
    return m, a[1] * np.exp(a[0] - m) + b[1] * np.exp(b[0] - m)


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
    ("04.2", merge_min, "min_not_max"),
    ("04.3", softmax_no_max, "no_max_subtraction"),
    ("04.3", softmax_upcast, "upcast"),
    ("04.3", softmax_by_max, "normalised_by_max"),
]


def update_inverted_rescale(m, l, block):
    """Multiplies the old sum by e^(m_new − m): NaN from the empty state, too big afterwards."""
    m_new = max(m, max(block))
    return m_new, l * np.exp(m_new - m) + sum(math.exp(x - m_new) for x in block)


def update_block_max(m, l, block):
    """The block's sum against the block's own max, added without bringing it to the running max."""
    m_new, mb = max(m, max(block)), max(block)
    return m_new, l * math.exp(m - m_new) + sum(math.exp(x - mb) for x in block)


def update_drops_old(m, l, block):
    m_new = max(m, max(block))
    return m_new, sum(math.exp(x - m_new) for x in block)


def update_max_reset(m, l, block):
    mb = max(block)
    return mb, l * math.exp(m - mb) + sum(math.exp(x - mb) for x in block)


def merge_inverted(a, b):
    m = max(a[0], b[0])
    return m, a[1] * np.exp(m - a[0]) + b[1] * np.exp(m - b[0])


def merge_to_other_max(a, b):
    return max(a[0], b[0]), a[1] * np.exp(a[0] - b[0]) + b[1] * np.exp(b[0] - a[0])


def softmax_minus_min(x):
    e = np.exp(x - x.min())
    return e / e.sum()


def softmax_minus_mean(x):
    e = np.exp(x - x.mean())
    return e / e.sum()


CATALOGUE += [
    ("04.1", update_inverted_rescale, "inverted_rescale"),
    ("04.1", update_block_max, "block_max_uncorrected"),
    ("04.1", update_drops_old, "old_sum_dropped"),
    ("04.1", update_max_reset, "running_max_reset"),
    ("04.2", merge_inverted, "inverted_rescale"),
    ("04.2", merge_to_other_max, "rescaled_to_other_max"),
    ("04.3", softmax_minus_min, "subtracted_min"),
    ("04.3", softmax_minus_mean, "subtracted_mean"),
]
