"""Chapter 08 exercises: causal masking tile by tile — which tiles to skip, and the mask of the others.

The checkers run a causal FA2 forward on the simulated memory with the learner's function plugged in and print
its read/write table (bytes by tensor) next to :func:`flashsim.traffic`'s causal count; outputs are compared with
the model's float64 causal reference, tile rules with the model's visibility rule.
"""
from __future__ import annotations

import numpy as np

from flashsim.course.kit.checker import (LearnerError, Suspect, Verdict, call_learner, check_cases,
                                         diagnose_attention, error_verdict, exercise, fa2_on_memory, io_differs,
                                         io_rows, random_qkv, reference_tile_kind, reference_tile_mask, verdict)
from flashsim.model.attention.visibility import n_blocks, tile_visible
from flashsim.model.simulator import traffic

__all__ = ["check_causal_tile_kind", "check_causal_tile_mask", "check_causal_flops_fraction", "causal_tile_counts"]

TILE_KIND = exercise(
    "08.1", "which tiles to skip",
    "fn(i, j, block_r, block_c, n) -> 'skip' | 'partial' | 'full' for tile (i, j) of the causal score matrix "
    "(query row r sees key column c iff c <= r; N need not be a multiple of the blocks).",
    ("Which element of a tile is the last to become visible, and which the first?",
     "Compare the tile's first and last key columns with its first and last query rows, in global indices (the "
     "last block may be short).",
     "Compute the tile's first and last query row and first and last key column (the last ones clipped at N − "
     "1); the first column against the last row decides skip, the last column against the first row decides "
     "full."),
    "check_causal_tile_kind")

TILE_MASK = exercise(
    "08.2", "the mask of a partial tile",
    "fn(i, j, block_r, block_c, n) -> bool array of tile (i, j)'s shape (smaller at a ragged end), True where the "
    "key is visible to the query.",
    ("Element (a, b) of tile (i, j) is which query row and which key column of the whole matrix?",
     "Build the tile's global row and column indices with np.arange and compare them by broadcasting.",
     "Build the tile's global rows i·Br + arange(r) and columns j·Bc + arange(c), r and c clipped at N, and "
     "compare them by broadcasting."),
    "check_causal_tile_mask")

FLOPS_FRACTION = exercise(
    "08.3", "what causal saves in FLOPs",
    "fn(n, block_r, block_c) -> float: the causal loop's FLOPs as a fraction of the non-causal loop's, for blocks "
    "that divide N (square or not).",
    ("A tile that is only partly visible: is it computed in full or in part?",
     "Count, for each row block i, how many K/V blocks it visits; its last row is (i+1)·Br − 1.",
     "For each row block i find its last row and how many K/V tiles of width Bc start at or before it (a "
     "partly visible tile counts in full); divide the total by Tr·Tc."),
    "check_causal_flops_fraction")

_CASES = ((16, 4, 4), (20, 8, 4), (19, 4, 8), (33, 8, 8), (12, 3, 4))  # (N, Br, Bc): square, Br != Bc, ragged,
# and a tile whose last key column equals its first query row (12, 3, 4: tile (1, 0) is full)


def causal_tile_counts(n: int, block_r: int, block_c: int, tile_kind=None) -> dict:
    """{"skip": .., "partial": .., "full": ..} tile counts of the Tr × Tc grid (the model's rule by default)."""
    tile_kind = tile_kind or reference_tile_kind
    counts = {"skip": 0, "partial": 0, "full": 0}
    for i in range(n_blocks(n, block_r)):
        for j in range(n_blocks(n, block_c)):
            counts[tile_kind(i, j, block_r, block_c, n)] += 1
    return counts


def _simulated_causal(n, d, br, bc) -> dict:
    """flashsim.traffic's causal flash2 counters restricted to Q, K, V, O (fp32)."""
    t = traffic("flash2", n, d, block_r=br, block_c=bc, dtype="fp32", causal=True, device="h200", sram_bytes=1 << 30)
    keep = ("Q", "K", "V", "O")
    return {"read_bytes_by_tensor": {k: v for k, v in t.read_bytes_by_tensor.items() if k in keep},
            "write_bytes_by_tensor": {k: v for k, v in t.write_bytes_by_tensor.items() if k in keep}}


def _run_causal(ex, d, quiet, tile_kind=None, tile_mask=None):
    """The causal FA2 loop over _CASES with the learner's piece: a failing Verdict, or (None, last table)."""
    rows = []
    for case, (n, br, bc) in enumerate(_CASES):
        where = f"N={n}, Br={br}, Bc={bc}"
        q, k, v = random_qkv(n, d, 10 + case)
        try:
            out, counters = fa2_on_memory(q, k, v, br, bc, causal=True, tile_kind=tile_kind, tile_mask=tile_mask)
        except LearnerError as err:
            return error_verdict(ex, err, where, quiet=quiet), rows
        rows = io_rows(counters, _simulated_causal(n, d, br, bc))
        key, why, ev = diagnose_attention(out, q, k, v, causal=True, tol=1e-4, block_n=bc, block_m=br)
        if key != "passed":
            return verdict(ex, False, f"{why} ({where})", diagnosis=key, table=rows, quiet=quiet, **ev), rows
        differ = io_differs(rows)
        if differ:
            by = {r[0]: r for r in rows}
            parts = [f"{t} {by[t][1]:,} B read, causal FA2 reads {by[t][3]:,}" for t in differ]
            return verdict(ex, False, f"O is right but the bytes differ (✘ rows) at {where}: " + "; ".join(parts)
                           + ": tiles the mask hides entirely are loaded", diagnosis="masked_not_skipped",
                           table=rows, quiet=quiet), rows
    return None, rows


def _rule(last_row, last_col, full_test, by_index=False):
    """A tile rule built from a learner's pieces: the last row of block i, the last column of tile j, and the
    test that makes a tile full."""
    def kind(i, j, br, bc, n):
        if by_index:
            return "skip" if j > i else ("full" if j < i else "partial")
        if j * bc > last_row(i, br, n):
            return "skip"
        return "full" if full_test(last_col(j, bc, n), i * br) else "partial"
    return kind


def _last_row(i, br, n):
    return min((i + 1) * br, n) - 1


def _last_col(j, bc, n):
    return min((j + 1) * bc, n) - 1


#: known wrong tile rules and what each means, in the learner's terms (08.1)
_KIND_SUSPECTS = (
    ("never_full", lambda i, j, br, bc, n: "skip" if not tile_visible(i, j, br, bc, n) else "partial",
     "every tile you do not skip is 'partial': a tile whose last key column is at or left of its first query "
     "row needs no mask, and the three-way rule is what lets the loop skip the mask there"),
    ("ragged_ignored", _rule(lambda i, br, n: (i + 1) * br - 1, lambda j, bc, n: (j + 1) * bc - 1,
                             lambda c, r: c <= r),
     "only tiles at the ragged end are wrong: the last block of rows or columns stops at N − 1, not at "
     "(i+1)·Br − 1 or (j+1)·Bc − 1, so a short last tile can be full"),
    ("strict_full_test", _rule(_last_row, _last_col, lambda c, r: c < r),
     "a tile whose last key column equals its first query row is called partial: key c = r is visible (c ≤ r), "
     "so the full test is ≤, not <"),
    ("tile_indices_compared", _rule(None, None, None, by_index=True),
     "your rule compares the tile indices i and j: with Br ≠ Bc tile (i, j) is not on the diagonal when i = j; "
     "compare rows and columns (i·Br, j·Bc)"),
)


def _tile_kind_diagnosis(fn, wrong) -> tuple[str, str]:
    """(key, why) of a wrong tile rule: a known rule it equals on every case, else the pattern of its mistakes."""
    for key, rule, why in _KIND_SUSPECTS:
        try:
            if all(call_learner(fn, i, j, br, bc, n) == rule(i, j, br, bc, n) for n, br, bc in _CASES
                   for i in range(n_blocks(n, br)) for j in range(n_blocks(n, bc))):
                return key, why
        except LearnerError:
            break
    if all(w[6] == "partial" for w in wrong) and any(w[5] == "skip" for w in wrong):
        return "masked_not_skipped", (f"{sum(w[5] == 'skip' for w in wrong)} tile(s) entirely above the diagonal "
                                      "are computed and masked: they cost loads and FLOPs for nothing (skip them)")
    if all(w[6] == "skip" for w in wrong):
        return "visible_tile_skipped", (f"{len(wrong)} tile(s) you skip hold visible keys: the first column of a "
                                        "tile can equal its last row")
    if all(w[5] == "skip" for w in wrong):
        return "masked_not_skipped", (f"{len(wrong)} tile(s) entirely above the diagonal are computed: they cost "
                                      "loads and FLOPs for nothing")
    if all(w[6] == "full" and w[5] == "partial" for w in wrong):
        return "partial_as_full", "tiles the diagonal crosses are marked full: their future keys leak in"
    if all(w[6] == "partial" and w[5] == "full" for w in wrong):
        return "full_as_partial", (f"{len(wrong)} tile(s) entirely at or below the diagonal are called partial: "
                                   "they need no mask")
    if all(w[1] != w[2] for w in wrong):
        return "wrong_when_blocks_differ", ("every wrong tile is in a tiling with Br ≠ Bc: compare rows and "
                                            "columns (i·Br, j·Bc), not the tile indices i and j")
    return "wrong_kinds", f"{len(wrong)} tiles have the wrong kind"


def check_causal_tile_kind(fn, quiet: bool = False) -> Verdict:
    """Exercise 08.1: every tile's kind against the model's visibility rule, then the causal loop's O and bytes."""
    wrong = []
    for n, br, bc in _CASES:
        for i in range(n_blocks(n, br)):
            for j in range(n_blocks(n, bc)):
                want = reference_tile_kind(i, j, br, bc, n)
                try:
                    got = call_learner(fn, i, j, br, bc, n)
                except LearnerError as err:
                    return error_verdict(TILE_KIND, err, f"tile ({i}, {j}), N={n}, Br={br}, Bc={bc}", quiet=quiet)
                if got not in ("skip", "partial", "full"):
                    return verdict(TILE_KIND, False, f"tile ({i}, {j}) gave {got!r}: the answer is 'skip', "
                                   "'partial' or 'full'", diagnosis="invalid_kind", quiet=quiet)
                if got != want:     # "partial" for a full tile is wrong too: the three-way rule is the point
                    wrong.append((n, br, bc, i, j, want, got))
    if wrong:
        n, br, bc, i, j, want, got = wrong[0]
        at = f"N={n}, Br={br}, Bc={bc}: tile ({i}, {j}) is {want!r}, you said {got!r}"
        key, why = _tile_kind_diagnosis(fn, wrong)
        bad, rows = _run_causal(TILE_KIND, 8, True, tile_kind=fn)
        return verdict(TILE_KIND, False, f"{at} ({why})", diagnosis=key, table=rows or None, quiet=quiet,
                       wrong_tiles=len(wrong))
    bad, rows = _run_causal(TILE_KIND, 8, quiet, tile_kind=fn)
    if bad is not None:
        return bad
    counts = causal_tile_counts(*_CASES[-1], tile_kind=fn)
    n, br, bc = _CASES[-1]
    return verdict(TILE_KIND, True, f"causal O exact, and K/V bytes equal the simulator's: at N={n}, Br={br}, "
                   f"Bc={bc} {counts['skip']} tiles skipped, {counts['partial']} masked, {counts['full']} full",
                   table=rows, counts=counts, quiet=quiet)


def check_causal_tile_mask(fn, quiet: bool = False) -> Verdict:
    """Exercise 08.2: every partial tile's mask against the model's rule, then the causal loop's O."""
    for n, br, bc in _CASES:
        for i in range(n_blocks(n, br)):
            for j in range(n_blocks(n, bc)):
                if reference_tile_kind(i, j, br, bc, n) != "partial":
                    continue
                want = reference_tile_mask(i, j, br, bc, n)
                at = f"tile ({i}, {j}) of N={n}, Br={br}, Bc={bc}"
                try:
                    got = np.asarray(call_learner(fn, i, j, br, bc, n))
                except LearnerError as err:
                    return error_verdict(TILE_MASK, err, at, quiet=quiet)
                if got.shape != want.shape:
                    return verdict(TILE_MASK, False, f"{at}: shape {got.shape}, expected {want.shape} (tiles at a "
                                   "ragged end are smaller)", diagnosis="wrong_shape", quiet=quiet)
                got = got.astype(bool)
                if np.array_equal(got, want):
                    continue
                rows_g = np.arange(i * br, i * br + want.shape[0])[:, None]
                cols_g = np.arange(j * bc, j * bc + want.shape[1])[None, :]
                local = np.arange(want.shape[1])[None, :] <= np.arange(want.shape[0])[:, None]
                if np.array_equal(got, cols_g < rows_g):
                    key, why = "diagonal_masked", "your mask hides the diagonal: a query sees its own key"
                elif np.array_equal(got, local):
                    key, why = "local_indices", ("your mask is the tile-local triangle: element (a, b) is query "
                                                 "i·Br + a and key j·Bc + b")
                elif np.array_equal(got, cols_g >= rows_g):
                    key, why = "mask_transposed", "your mask shows the future keys and hides the past ones"
                elif got.all():
                    key, why = "all_visible", ("your mask shows every key of the tile: in a tile the diagonal "
                                               "crosses, keys after the query must be hidden")
                else:
                    key, why = "wrong_mask", f"{int((got != want).sum())} entries differ"
                return verdict(TILE_MASK, False, f"{at}: {why}", diagnosis=key, quiet=quiet)
    bad, rows = _run_causal(TILE_MASK, 8, quiet, tile_mask=fn)
    if bad is not None:
        return bad
    return verdict(TILE_MASK, True, "every partial tile's mask is right and the causal output is exact", table=rows,
                   quiet=quiet)


def _visited(n, br, bc) -> float:
    """The fraction of tiles a causal loop visits, with row blocks of br and column tiles of bc (divisible N)."""
    tr, tc = n // br, n // bc
    return sum(min(tc, -(-(i + 1) * br // bc)) for i in range(tr)) / (tr * tc)


def _fraction_ref(n, br, bc) -> float:
    kw = dict(block_r=br, block_c=bc, sram_bytes=1 << 30)
    return traffic("flash2", n, 64, causal=True, **kw).flops / traffic("flash2", n, 64, **kw).flops


def check_causal_flops_fraction(fn, quiet: bool = False) -> Verdict:
    """Exercise 08.3: against :func:`flashsim.traffic`'s FLOPs, square and rectangular blocks."""
    cases = [(256, 64, 64), (1024, 64, 64), (1024, 128, 64), (1024, 64, 128), (4096, 128, 32), (8192, 16, 64)]
    suspects = (Suspect("diagonal_ignored", lambda n, br, bc: 0.5, "you answer exactly one half: the tiles the "
                        "diagonal crosses are computed in full"),
                Suspect("causal_ignored", lambda n, br, bc: 1.0, "you answer 1: the causal loop skips tiles"),
                Suspect("square_blocks_formula", lambda n, br, bc: (n // bc + 1) / (2 * (n // bc)),
                        "your fraction is the square-block one, (T + 1)/2T with T = N/Bc: wrong when Br ≠ Bc"),
                Suspect("square_blocks_formula", lambda n, br, bc: (n // br + 1) / (2 * (n // br)),
                        "your fraction is the square-block one, (T + 1)/2T with T = N/Br: wrong when Br ≠ Bc"),
                Suspect("br_bc_swapped", lambda n, br, bc: sum(min(n // bc, -(-(i + 1) * bc // br))
                                                               for i in range(n // br)) / (n // br * (n // bc)),
                        "your count swaps Br and Bc: row block i ends at row (i+1)·Br − 1, and the K/V tiles it "
                        "visits are Bc wide"),
                Suspect("partial_tile_dropped", lambda n, br, bc: sum(min(n // bc, (i + 1) * br // bc)
                                                                      for i in range(n // br)) / (n // br * (n // bc)),
                        "your count rounds (i+1)·Br/Bc down: the tile the diagonal crosses is computed too"),
                Suspect("tile_index_diagonal", lambda n, br, bc: sum(min(n // bc, i + 1) for i in range(n // br))
                        / (n // br * (n // bc)),
                        "row block i visits i + 1 tiles in your count: that holds only when Br = Bc; it visits "
                        "⌈(i+1)·Br/Bc⌉"))
    return check_cases(FLOPS_FRACTION, fn, cases, _fraction_ref, abs_tol=1e-9,
                       header=("N, Br, Bc", "simulator's FLOPs ratio", "your fraction"), suspects=suspects,
                       quiet=quiet)
