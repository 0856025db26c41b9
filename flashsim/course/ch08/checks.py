"""Chapter 08 exercises: causal masking tile by tile — which tiles to skip, and the mask of the others.

Checkers print a verdict and the read/write table of a causal FA2 forward run with the learner's function plugged
in (bytes by tensor), next to :func:`flashsim.traffic`'s causal count.
"""
from __future__ import annotations

import math

import numpy as np

from flashsim.model.attention.flash import reference_attention
from flashsim.course.ch00.checks import Verdict
from flashsim.course.ch05.checks import _fa2_loop, _qkv, finish, raised, rw_table

__all__ = ["check_causal_tile_kind", "check_causal_tile_mask", "check_causal_flops_fraction", "causal_tile_counts"]

_CASES = ((16, 4, 4), (20, 8, 4), (19, 4, 8), (33, 8, 8))  # (N, Br, Bc): square, Br != Bc, ragged


def causal_tile_counts(n: int, block_r: int, block_c: int, tile_kind=None) -> dict:
    """{"skip": .., "partial": .., "full": ..} tile counts of the Tr × Tc grid (reference rule by default).

    Introduced in chapter 08.
    """
    from flashsim.solutions.ch08 import causal_tile_kind
    tile_kind = tile_kind or causal_tile_kind
    counts = {"skip": 0, "partial": 0, "full": 0}
    for i in range(math.ceil(n / block_r)):
        for j in range(math.ceil(n / block_c)):
            counts[tile_kind(i, j, block_r, block_c, n)] += 1
    return counts


def _simulated_causal(n, d, br, bc):
    """flashsim.traffic's causal flash2 counters restricted to Q, K, V, O (fp32), or None if it is missing."""
    try:
        from flashsim.model.simulator import traffic
    except ImportError:
        return None
    t = traffic("flash2", n, d, block_r=br, block_c=bc, dtype="fp32", causal=True, device="h200",
                sram_bytes=1 << 30)
    keep = ("Q", "K", "V", "O")
    return {"read_bytes_by_tensor": {k: v for k, v in t.read_bytes_by_tensor.items() if k in keep},
            "write_bytes_by_tensor": {k: v for k, v in t.write_bytes_by_tensor.items() if k in keep}}


def _run_causal(d, tile_kind=None, tile_mask=None):
    """Run the causal FA2 loop over _CASES with the learner's pieces: (failure message or None, last table,
    details)."""
    from flashsim.solutions.ch08 import causal_tile_kind
    table = []
    for case, (n, br, bc) in enumerate(_CASES):
        q, k, v = _qkv(n, d, 10 + case)
        try:
            out, counters = _fa2_loop(None, q, k, v, br, bc, causal=True, tile_kind=tile_kind, tile_mask=tile_mask)
        except Exception as exc:  # noqa: BLE001
            return f"{raised(exc)} (N={n}, Br={br}, Bc={bc})", [], {}
        sim = _simulated_causal(n, d, br, bc)
        if sim is None:  # the simulator is not there: the reference tile rule gives the bytes
            _, ref = _fa2_loop(None, q, k, v, br, bc, causal=True, tile_kind=causal_tile_kind)
            sim = ref
        table = rw_table(counters, sim)
        if not np.isfinite(out).all():
            bad = int((~np.isfinite(out)).any(axis=1).sum())
            return (f"{bad} rows of O are NaN/inf (N={n}, Br={br}, Bc={bc}): a query row saw "
                                       "no key at all; the diagonal (c == r) must stay visible"), table, {}
        err = float(np.abs(out - reference_attention(q, k, v, causal=True)).max())
        if err > 1e-4:
            return (f"max |O - exact causal| = {err:.3g} (N={n}, Br={br}, Bc={bc}): a visible "
                                       "key was skipped or masked, or a future key was let through"), table, {"max_error": err}
        for tensor, r, w, wr, ww in table:
            if r != wr or w != ww:
                return (f"O is right but {tensor} moved {r:,} B read / {w:,} B written; causal "
                                           f"FA2 moves {wr:,} / {ww:,} (N={n}, Br={br}, Bc={bc}): tiles above the "
                                           "diagonal must be skipped, not loaded and masked"), table, {}
    return None, table, {}


def check_causal_tile_kind(fn, quiet: bool = False) -> Verdict:
    """Exercise 08.1: ``fn(i, j, block_r, block_c, n) -> "skip" | "partial" | "full"`` for tile (i, j) of the
    causal score matrix (query row r sees key column c iff c <= r; N need not be a multiple of the blocks).

    Introduced in chapter 08.
    """
    from flashsim.solutions.ch08 import causal_tile_kind
    name = "causal_tile_kind"
    for n, br, bc in _CASES:
        for i in range(math.ceil(n / br)):
            for j in range(math.ceil(n / bc)):
                want = causal_tile_kind(i, j, br, bc, n)
                try:
                    got = fn(i, j, br, bc, n)
                except Exception as exc:  # noqa: BLE001
                    return finish(name, False, f"{raised(exc)} at tile ({i}, {j})", quiet=quiet)
                if got not in ("skip", "partial", "full"):
                    return finish(name, False, f"tile ({i}, {j}) gave {got!r}: answer 'skip', 'partial' or 'full'",
                                  quiet=quiet)
                if got != want and not (got == "partial" and want == "full"):
                    # partial for a full tile only costs a useless mask; the run below still judges the bytes
                    if want == "skip" or got == "skip":
                        break
                    return finish(name, False, f"N={n}, Br={br}, Bc={bc}: tile ({i}, {j}) is {want!r}, you said "
                                               f"{got!r}", quiet=quiet)
    bad, table, details = _run_causal(8, tile_kind=fn)
    if bad is not None:
        return finish(name, False, bad, table, **details, quiet=quiet)
    counts = causal_tile_counts(*_CASES[-1], tile_kind=fn)
    return finish(name, True, f"causal O exact, and K/V bytes equal the simulator's: at N={_CASES[-1][0]}, "
                              f"Br={_CASES[-1][1]}, Bc={_CASES[-1][2]} {counts['skip']} tiles skipped, "
                              f"{counts['partial']} masked, {counts['full']} full", table, counts=counts, quiet=quiet)


def check_causal_tile_mask(fn, quiet: bool = False) -> Verdict:
    """Exercise 08.2: ``fn(i, j, block_r, block_c, n) -> bool array`` of tile (i, j)'s shape (the last tiles are
    smaller when N is ragged), True where key column <= query row (global indices).

    Introduced in chapter 08.
    """
    from flashsim.solutions.ch08 import causal_tile_kind, causal_tile_mask
    name = "causal_tile_mask"
    for n, br, bc in _CASES:
        for i in range(math.ceil(n / br)):
            for j in range(math.ceil(n / bc)):
                if causal_tile_kind(i, j, br, bc, n) != "partial":
                    continue
                want = causal_tile_mask(i, j, br, bc, n)
                try:
                    got = np.asarray(fn(i, j, br, bc, n))
                except Exception as exc:  # noqa: BLE001
                    return finish(name, False, f"{raised(exc)} at tile ({i}, {j})", quiet=quiet)
                if got.shape != want.shape:
                    return finish(name, False, f"tile ({i}, {j}) of N={n}, Br={br}, Bc={bc}: shape {got.shape}, "
                                               f"want {want.shape} (ragged last blocks are smaller)", quiet=quiet)
                if not np.array_equal(got.astype(bool), want):
                    wrong = int((got.astype(bool) != want).sum())
                    _, table, _ = _run_causal(8, tile_mask=fn)
                    return finish(name, False, f"tile ({i}, {j}) of N={n}, Br={br}, Bc={bc}: {wrong} entries wrong "
                                               "(use global indices: row i·Br + a, column j·Bc + b; c <= r)",
                                  table or [], quiet=quiet)
    bad, table, details = _run_causal(8, tile_mask=fn)
    if bad is not None:
        return finish(name, False, bad, table, **details, quiet=quiet)
    return finish(name, True, "every partial tile's mask is right and the causal output is exact", table, quiet=quiet)


def check_causal_flops_fraction(fn, quiet: bool = False) -> Verdict:
    """Exercise 08.3: ``fn(n, block_r, block_c) -> float``, the causal loop's FLOPs as a fraction of the
    non-causal loop's, for blocks that divide N (square or not). Checked against :func:`flashsim.traffic`'s FLOPs.

    Introduced in chapter 08.
    """
    from flashsim.model.simulator import traffic
    from flashsim.course import Table
    name = "causal_flops_fraction"
    rows, bad = [], None
    for n, br, bc in ((256, 64, 64), (1024, 64, 64), (1024, 128, 64), (1024, 64, 128), (4096, 128, 32),
                      (8192, 16, 64)):
        kw = dict(block_r=br, block_c=bc, sram_bytes=1 << 30)
        want = traffic("flash2", n, 64, causal=True, **kw).flops / traffic("flash2", n, 64, **kw).flops
        try:
            got = float(fn(n, br, bc))
        except Exception as exc:  # noqa: BLE001
            return finish(name, False, raised(exc), quiet=quiet)
        ok = abs(got - want) <= 1e-9
        rows.append([n, br, bc, round(got, 6), round(want, 6), "✔" if ok else "✘"])
        if not ok and bad is None:
            bad = (n, br, bc, got, want)
    table = Table(["N", "Br", "Bc", "your fraction", "simulator's FLOPs ratio", "ok"], rows)
    if bad:
        n, br, bc, got, want = bad
        return finish(name, False, f"N={n}, Br={br}, Bc={bc}: {got:.4f}, the simulator counts {want:.4f}: how many "
                                   "K/V blocks does row block i visit? (its last row is (i+1)·Br − 1)", table,
                      quiet=quiet)
    return finish(name, True, "matches the simulator's FLOP counts for square and rectangular blocks", table,
                  quiet=quiet)
