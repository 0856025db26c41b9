"""Chapter 08 exercises: causal masking tile by tile — which tiles to skip, and the mask of the others.

The checkers run a causal FA2 forward on the simulated memory with the learner's function plugged in and print
its read/write table (bytes by tensor) next to :func:`flashsim.traffic`'s causal count; outputs are compared with
the model's float64 causal reference, tile rules with the model's visibility rule.
"""
from __future__ import annotations

import numpy as np

from flashsim.course.kit.checker import (LearnerError, Suspect, Verdict, attention_where, call_learner, check_cases,
                                         diagnose_attention, error_verdict, exercise, fa2_on_memory, io_differs,
                                         io_rows, loop_table, random_qkv, reference_tile_kind, reference_tile_mask,
                                         verdict)
from flashsim.model.attention.reference import softmax_scale
from flashsim.model.attention.visibility import n_blocks
from flashsim.model.simulator import traffic

__all__ = ["check_causal_tile_kind", "check_causal_tile_mask", "check_causal_flops_fraction", "causal_tile_counts"]

TILE_KIND = exercise(
    "08.1", "which tiles to skip, with a sliding window",
    "fn(i, j, block_r, block_c, n, window) -> 'skip' | 'partial' | 'full' for tile (i, j) of a causal "
    "sliding-window score matrix: query row r sees key column c iff r − window < c and c <= r (a window of N or "
    "more is plain causal; N need not be a multiple of the blocks).",
    ("A window hides keys on two sides of each row now. Which corner of a tile decides each side?",
     "Work in global indices: the tile's first and last query row and first and last key column, the last ones "
     "clipped at N − 1. A tile is skipped when no (row, column) pair in it is visible, full when every pair is.",
     "The key column furthest right must not pass the first row, and the one furthest left must stay inside the "
     "last row's window; for skip, ask the same of the opposite corners."),
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
    table = None
    for case, (n, br, bc) in enumerate(_CASES):
        where = f"N={n}, Br={br}, Bc={bc}"
        q, k, v = random_qkv(n, d, 10 + case)
        try:
            out, counters = fa2_on_memory(q, k, v, br, bc, causal=True, tile_kind=tile_kind, tile_mask=tile_mask)
        except LearnerError as err:
            return error_verdict(ex, err, where, quiet=quiet), table
        want = _simulated_causal(n, d, br, bc)
        rows = io_rows(counters, want)
        table = loop_table(counters, want, label="the checker's causal loop", want_label="flashsim.traffic")
        key, why, ev = diagnose_attention(out, q, k, v, causal=True, tol=1e-4, block_n=bc, block_m=br)
        if key != "passed":
            return verdict(ex, False, f"{why} ({where})", diagnosis=key, table=table, quiet=quiet, **ev), table
        differ = io_differs(rows)
        if differ:
            by = {r[0]: r for r in rows}
            parts = [f"{t} {by[t][1]:,} B read, causal FA2 reads {by[t][3]:,}" for t in differ]
            return verdict(ex, False, f"O is right but the bytes differ (✘ rows) at {where}: " + "; ".join(parts)
                           + ": tiles the mask hides entirely are loaded", diagnosis="masked_not_skipped",
                           table=table, quiet=quiet), table
    return None, table


#: (N, Br, Bc, window) of 08.1: plain causal (window ≥ N), windows smaller and larger than a block, Br ≠ Bc,
#: ragged N, and a tile whose last key column equals its first query row (12, 3, 4: tile (1, 0) is full)
_WINDOW_CASES = ((16, 4, 4, 16), (20, 8, 4, 6), (19, 4, 8, 5), (33, 8, 8, 12), (12, 3, 4, 12), (24, 4, 4, 8),
                 (30, 8, 4, 9))


def _bounds(i, j, br, bc, n, clip=True):
    """(first row, last row, first column, last column) of tile (i, j), the last ones clipped at N − 1."""
    last_r, last_c = (i + 1) * br - 1, (j + 1) * bc - 1
    if clip:
        last_r, last_c = min(last_r, n - 1), min(last_c, n - 1)
    return i * br, last_r, j * bc, last_c


def window_visible(n: int, window: int) -> np.ndarray:
    """(N, N) bool: query r sees key c iff r − window < c <= r (the definition, element by element)."""
    r, c = np.arange(n)[:, None], np.arange(n)[None, :]
    return (c <= r) & (c > r - window)


def window_tile_kind(i: int, j: int, block_r: int, block_c: int, n: int, window: int) -> str:
    """08.1's reference, from the element-wise rule: "skip" when no key of the tile is visible, "full" when all
    are, else "partial"."""
    r0, r1, c0, c1 = _bounds(i, j, block_r, block_c, n)
    vis = window_visible(n, window)[r0:r1 + 1, c0:c1 + 1]
    return "skip" if not vis.any() else ("full" if vis.all() else "partial")


def _rule(*, clip=True, strict_full=False, window_used=True, shift=0, rows_swapped=False, never_full=False,
          by_index=False):
    """A tile rule as a learner writes it, from corners, with one slip switched on."""
    def kind(i, j, br, bc, n, w):
        if by_index:
            return "skip" if j > i else ("full" if j < i else "partial")
        r0, r1, c0, c1 = _bounds(i, j, br, bc, n, clip)
        w = w + shift if window_used else 10 ** 9
        left_skip_row, left_full_row = (r1, r0) if rows_swapped else (r0, r1)
        if c0 > r1 or c1 <= left_skip_row - w:
            return "skip"
        if never_full:
            return "partial"
        full = (c1 < r0 if strict_full else c1 <= r0) and c0 > left_full_row - w
        return "full" if full else "partial"
    return kind


#: known wrong tile rules and what each means, in the learner's terms (08.1)
_KIND_SUSPECTS = (
    ("never_full", _rule(never_full=True),
     "every tile you do not skip is 'partial': a tile whose every key is visible to every query needs no mask, and "
     "the three-way rule is what lets the loop skip the mask there"),
    ("window_ignored", _rule(window_used=False),
     "your rule is plain causal: tiles entirely left of the window are computed, and tiles the window's left edge "
     "crosses are called full"),
    ("window_off_by_one", _rule(shift=1),
     "your window holds window + 1 keys: a query sees c only when c > r − window, so key r − window is hidden"),
    ("window_rows_swapped", _rule(rows_swapped=True),
     "your window test uses the wrong row at the left edge: the first query row reaches furthest left, so it "
     "decides skip, and the last row, which reaches least far, decides full"),
    ("ragged_ignored", _rule(clip=False),
     "only tiles at the ragged end are wrong: the last block of rows or columns stops at N − 1, not at "
     "(i+1)·Br − 1 or (j+1)·Bc − 1"),
    ("strict_full_test", _rule(strict_full=True),
     "a tile whose last key column equals its first query row is called partial: key c = r is visible (c <= r), "
     "so the full test is <=, not <"),
    ("tile_indices_compared", _rule(by_index=True),
     "your rule compares the tile indices i and j: with Br ≠ Bc tile (i, j) is not on the diagonal when i = j; "
     "compare rows and columns (i·Br, j·Bc)"),
)


def _all_tiles():
    for n, br, bc, w in _WINDOW_CASES:
        for i in range(n_blocks(n, br)):
            for j in range(n_blocks(n, bc)):
                yield n, br, bc, w, i, j


def _tile_kind_diagnosis(fn, wrong) -> tuple[str, str]:
    """(key, why) of a wrong tile rule: a known rule it equals on every tile, else the pattern of its mistakes."""
    for key, rule, why in _KIND_SUSPECTS:
        try:
            if all(call_learner(fn, i, j, br, bc, n, w) == rule(i, j, br, bc, n, w)
                   for n, br, bc, w, i, j in _all_tiles()):
                return key, why
        except LearnerError:
            break
    if all(w[7] == "partial" for w in wrong) and any(w[6] == "skip" for w in wrong):
        return "masked_not_skipped", (f"{sum(w[6] == 'skip' for w in wrong)} tile(s) with no visible key are "
                                      "computed and masked: they cost loads and FLOPs for nothing (skip them)")
    if all(w[7] == "skip" for w in wrong):
        return "visible_tile_skipped", (f"{len(wrong)} tile(s) you skip hold visible keys: check both corners a "
                                        "skip depends on")
    if all(w[6] == "skip" for w in wrong):
        return "masked_not_skipped", (f"{len(wrong)} tile(s) with no visible key are computed: they cost loads "
                                      "and FLOPs for nothing")
    if all(w[7] == "full" and w[6] == "partial" for w in wrong):
        return "partial_as_full", "tiles an edge of the window crosses are marked full: hidden keys leak in"
    if all(w[7] == "partial" and w[6] == "full" for w in wrong):
        return "full_as_partial", f"{len(wrong)} tile(s) whose every key is visible are called partial"
    return "wrong_kinds", f"{len(wrong)} tiles have the wrong kind"


def _safe_update(m, l, acc, s, v):
    """The online update, safe for a row whose keys in this tile are all hidden (no NaN from −inf − (−inf))."""
    m_new = np.maximum(m, s.max(axis=1))
    base = np.where(np.isfinite(m_new), m_new, 0.0)
    p = np.exp(s - base[:, None])
    alpha = np.where(np.isfinite(m), np.exp(m - base), 0.0)
    return m_new, alpha * l + p.sum(axis=1), alpha[:, None] * acc + p @ v


def _window_loop(q, k, v, br, bc, window, tile_kind):
    """FA2's loop (:func:`fa2_on_memory`, one step's tiles of SRAM) with a sliding-window mask: the learner's tile
    rule decides skip / partial / full, partial tiles get the element-wise mask. Returns (O, counters)."""
    vis = window_visible(q.shape[0], window)

    def mask(i, j, br_, bc_, n):
        return vis[i * br_:min((i + 1) * br_, n), j * bc_:min((j + 1) * bc_, n)]
    return fa2_on_memory(q, k, v, br, bc, causal=True, update=_safe_update, tile_mask=mask,
                         tile_kind=lambda i, j, br_, bc_, n: tile_kind(i, j, br_, bc_, n, window))


def check_causal_tile_kind(fn, quiet: bool = False) -> Verdict:
    """Exercise 08.1: every tile's kind against the element-wise sliding-window rule, then FA2's loop with the
    learner's rule: O against float64 windowed attention, K/V bytes against the loop with the right rule."""
    wrong = []
    for n, br, bc, w, i, j in _all_tiles():
        want = window_tile_kind(i, j, br, bc, n, w)
        try:
            got = call_learner(fn, i, j, br, bc, n, w)
        except LearnerError as err:
            return error_verdict(TILE_KIND, err, f"tile ({i}, {j}), N={n}, Br={br}, Bc={bc}, window={w}",
                                 quiet=quiet)
        if got not in ("skip", "partial", "full"):
            return verdict(TILE_KIND, False, f"tile ({i}, {j}) gave {got!r}: the answer is 'skip', 'partial' or "
                           "'full'", diagnosis="invalid_kind", quiet=quiet)
        if got != want:     # "partial" for a full tile is wrong too: the three-way rule is the point
            wrong.append((n, br, bc, w, i, j, want, got))
    rows = []
    if wrong:
        n, br, bc, w, i, j, want, got = wrong[0]
        key, why = _tile_kind_diagnosis(fn, wrong)
        return verdict(TILE_KIND, False, f"N={n}, Br={br}, Bc={bc}, window={w}: tile ({i}, {j}) is {want!r}, you "
                       f"said {got!r} ({why})", diagnosis=key, quiet=quiet, wrong_tiles=len(wrong))
    for case, (n, br, bc, w) in enumerate(_WINDOW_CASES):
        q, k, v = random_qkv(n, 8, 10 + case)
        out, counters = _window_loop(q, k, v, br, bc, w, fn)
        _, want = _window_loop(q, k, v, br, bc, w, window_tile_kind)
        rows = loop_table(counters, want, label="the loop with your rule", want_label="the loop with the right rule")
        ref = attention_where(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64),
                              softmax_scale(8), window_visible(n, w))
        err = float(np.abs(out - ref).max()) if np.isfinite(out).all() else np.inf
        if not err < 1e-4:
            return verdict(TILE_KIND, False, f"max |O − exact| = {err:.3g} at N={n}, window={w}",
                           diagnosis="wrong_output", table=rows, quiet=quiet)
    counts = {"skip": 0, "partial": 0, "full": 0}
    n, br, bc, w = _WINDOW_CASES[-1]
    for i in range(n_blocks(n, br)):
        for j in range(n_blocks(n, bc)):
            counts[window_tile_kind(i, j, br, bc, n, w)] += 1
    return verdict(TILE_KIND, True, f"every tile's kind is right and the windowed O is exact; at N={n}, Br={br}, "
                   f"Bc={bc}, window={w}: {counts['skip']} tiles skipped, {counts['partial']} masked, {counts['full']} "
                   "full (the table: the loop with your rule)", table=rows, counts=counts, quiet=quiet)


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
