"""Wrong answers learners write for chapter 08, each with the diagnosis its checker must give."""
import numpy as np


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
    ("08.2", mask_strict, "diagonal_masked"),
    ("08.2", mask_local, "local_indices"),
    ("08.2", mask_transposed, "mask_transposed"),
    ("08.3", lambda n, br, bc: 0.5, "diagonal_ignored"),
    ("08.3", lambda n, br, bc: 1.0, "causal_ignored"),
    ("08.3", lambda n, br, bc: (n // bc + 1) / (2 * (n // bc)), "square_blocks_formula"),
]


def mask_all_true(i, j, br, bc, n):
    rows, cols = _idx(i, j, br, bc, n)
    return np.ones((rows.shape[0], cols.shape[1]), bool)


def mask_whole_block(i, j, br, bc, n):
    """Ignores the ragged end: always a Br × Bc mask."""
    rows = np.arange(i * br, (i + 1) * br)[:, None]
    cols = np.arange(j * bc, (j + 1) * bc)[None, :]
    return cols <= rows


def _frac(n, br, bc, per_block):
    tr, tc = n // br, n // bc
    return sum(min(tc, per_block(i)) for i in range(tr)) / (tr * tc)


CATALOGUE += [
    ("08.2", mask_all_true, "all_visible"),
    ("08.2", mask_whole_block, "wrong_shape"),
    ("08.3", lambda n, br, bc: _frac(n, br, bc, lambda i: (i + 1) * br // bc), "partial_tile_dropped"),
    ("08.3", lambda n, br, bc: _frac(n, br, bc, lambda i: -(-(i + 1) * bc // br)), "br_bc_swapped"),
    ("08.3", lambda n, br, bc: _frac(n, br, bc, lambda i: i + 1), "tile_index_diagonal"),
]


def _kind(i, j, br, bc, n, w, *, clip=True, strict=False, window=True, shift=0, swapped=False, never_full=False):
    """The sliding-window tile rule as a learner writes it, with one slip switched on."""
    first_row, last_row = i * br, (min((i + 1) * br, n) if clip else (i + 1) * br) - 1
    first_col, last_col = j * bc, (min((j + 1) * bc, n) if clip else (j + 1) * bc) - 1
    w = w + shift if window else n * 10
    skip_row, full_row = (last_row, first_row) if swapped else (first_row, last_row)
    if first_col > last_row or last_col <= skip_row - w:
        return "skip"
    if never_full:
        return "partial"
    right_ok = last_col < first_row if strict else last_col <= first_row
    return "full" if right_ok and first_col > full_row - w else "partial"


def kind_never_full(i, j, br, bc, n, w):
    """Issue 26: 'partial' for every tile that is not skipped ("15 masked, 0 full") used to pass."""
    return _kind(i, j, br, bc, n, w, never_full=True)


def kind_ragged_ignored(i, j, br, bc, n, w):
    """Issue 26: the blocks' last row and column taken as (i+1)·Br − 1 and (j+1)·Bc − 1 even past N."""
    return _kind(i, j, br, bc, n, w, clip=False)


def kind_strict_full(i, j, br, bc, n, w):
    """Issue 26: a strict < in the full test."""
    return _kind(i, j, br, bc, n, w, strict=True)


def kind_plain_causal(i, j, br, bc, n, w):
    """The chapter's causal rule, transcribed: the window ignored."""
    return _kind(i, j, br, bc, n, w, window=False)


def kind_window_off_by_one(i, j, br, bc, n, w):
    return _kind(i, j, br, bc, n, w, shift=1)


def kind_window_rows_swapped(i, j, br, bc, n, w):
    return _kind(i, j, br, bc, n, w, swapped=True)


def kind_off_by_one_skip(i, j, br, bc, n, w):
    """Skips a tile whose first column equals the block's last row (one visible element lost)."""
    first_row, last_row = i * br, min((i + 1) * br, n) - 1
    first_col, last_col = j * bc, min((j + 1) * bc, n) - 1
    if first_col >= last_row or last_col <= first_row - w:
        return "skip"
    return "full" if last_col <= first_row and first_col > last_row - w else "partial"


def kind_mask_everything(i, j, br, bc, n, w):
    """Correct output, no saving: masks every tile."""
    return "partial"


def kind_indices(i, j, br, bc, n, w):
    """Compares tile indices, right only for square blocks (and no window)."""
    return "skip" if j > i else ("partial" if j == i else "full")


CATALOGUE += [
    ("08.1", kind_never_full, "never_full"),
    ("08.1", kind_ragged_ignored, "ragged_ignored"),
    ("08.1", kind_strict_full, "strict_full_test"),
    ("08.1", kind_plain_causal, "window_ignored"),
    ("08.1", kind_window_off_by_one, "window_off_by_one"),
    ("08.1", kind_window_rows_swapped, "window_rows_swapped"),
    ("08.1", kind_off_by_one_skip, "visible_tile_skipped"),
    ("08.1", kind_mask_everything, "masked_not_skipped"),
    ("08.1", kind_indices, "tile_indices_compared"),
]
