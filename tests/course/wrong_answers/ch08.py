"""Wrong answers learners write for chapter 08, each with the diagnosis its checker must give."""
import numpy as np


def kind_off_by_one(i, j, br, bc, n):
    """Skips a tile whose first column equals the block's last row (one visible element lost)."""
    first_row, last_row = i * br, min((i + 1) * br, n) - 1
    first_col, last_col = j * bc, min((j + 1) * bc, n) - 1
    if first_col >= last_row:
        return "skip"
    return "full" if last_col <= first_row else "partial"


def kind_never_skip(i, j, br, bc, n):
    """Correct output, no saving: masks every tile."""
    return "partial"


def kind_tile_indices(i, j, br, bc, n):
    """Compares tile indices, right only for square blocks."""
    return "skip" if j > i else ("partial" if j == i else "full")


def _idx(i, j, br, bc, n):
    return np.arange(i * br, min((i + 1) * br, n))[:, None], np.arange(j * bc, min((j + 1) * bc, n))[None, :]


def mask_strict(i, j, br, bc, n):
    rows, cols = _idx(i, j, br, bc, n)
    return cols < rows


def mask_local(i, j, br, bc, n):
    rows, cols = _idx(i, j, br, bc, n)
    return np.arange(cols.shape[1])[None, :] <= np.arange(rows.shape[0])[:, None]


def mask_transposed(i, j, br, bc, n):
    rows, cols = _idx(i, j, br, bc, n)
    return cols >= rows


CATALOGUE = [
    ("08.1", kind_off_by_one, "visible_tile_skipped"),
    ("08.1", kind_never_skip, "masked_not_skipped"),
    ("08.1", kind_tile_indices, "wrong_when_blocks_differ"),
    ("08.2", mask_strict, "diagonal_masked"),
    ("08.2", mask_local, "local_indices"),
    ("08.2", mask_transposed, "mask_transposed"),
    ("08.3", lambda n, br, bc: 0.5, "diagonal_ignored"),
    ("08.3", lambda n, br, bc: 1.0, "causal_ignored"),
    ("08.3", lambda n, br, bc: (n // bc + 1) / (2 * (n // bc)), "square_blocks_formula"),
]
