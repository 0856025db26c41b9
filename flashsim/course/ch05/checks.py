"""Chapter 05 exercises: the FlashAttention forward loop, checked on the simulated memory hierarchy.

Each ``check_...(fn)`` runs the learner's function, prints a verdict with its diagnosis and a read/write table
(bytes by tensor, yours against the algorithm's) and returns a :class:`~flashsim.course.kit.checker.Verdict`.
Outputs are compared with the model's float64 reference attention.
"""
from __future__ import annotations

import numpy as np

from flashsim.course.kit.checker import (LearnerError, Suspect, Verdict, call_learner, check_cases,
                                         diagnose_attention, error_verdict, exercise, fa2_on_memory, io_differs,
                                         io_rows, loop_table, random_qkv, sram_overflow_verdict, verdict)
from flashsim.errors import SramCapacityError
from flashsim.model.attention.visibility import n_blocks
from flashsim.model.memory import Counters, Memory
from flashsim.model.simulator import traffic

__all__ = ["check_online_block_update", "check_flash2_forward_loop", "check_fa1_hbm_bytes",
           "expected_flash2_counters"]

ONLINE_BLOCK_UPDATE = exercise(
    "05.1", "online block update",
    "fn(m, l, acc, s, v) -> (m_new, l_new, acc_new): fold one K/V tile into the running state of the FA2 inner "
    "loop, so that after the last tile acc / l is the attention output. m, l: (Br,) running max and sum; acc: "
    "(Br, d) unnormalised output; s: (Br, Bc) scaled scores; v: (Bc, d).",
    ("Chapter 04 folded a block of scores into (m, l). What else must follow the running max now?",
     "Everything summed so far (l and acc) was weighted relative to the old max; the tile's own terms use the "
     "new one.",
     "Compute the new max and α = e^(m − m_new) first; everything carried over (l and acc) is multiplied by "
     "α, and the tile's P is taken against the new max."),
    "check_online_block_update")

FLASH2_FORWARD_LOOP = exercise(
    "05.2", "the FA2 forward loop",
    "fn(mem, n, d, block_r, block_c) runs the FlashAttention-2 forward on a Memory holding Q, K, V and an empty O "
    "(fp32), with mem.load / mem.store, so that O is right and every tensor moves exactly the bytes of FA2's loop "
    "order. N need not be a multiple of the blocks.",
    ("Which loop is outside in FA2, the one over Q blocks or the one over K/V blocks, and what stays on chip?",
     "Load Q_i once per row block; stream every K_j, V_j past it; store O_i once; your 05.1 update does the math.",
     "Outer loop over row blocks: load Q_i and start m, l, acc; inner loop: load K_j and V_j, call your "
     "update, free them; after the inner loop store acc / l once and free Q_i."),
    "check_flash2_forward_loop")

FA1_HBM_BYTES = exercise(
    "05.3", "Algorithm 1's HBM bytes, statistics in fp32",
    "fn(n, d, block_c, elem_bytes, stats_bytes) -> int: the HBM bytes (reads + writes) of FlashAttention-1's "
    "forward (Algorithm 1) when Q, K, V and O are stored in elem_bytes but the statistics ℓ and m in stats_bytes "
    "(as kernels keep them in fp32), without the initial memset.",
    ("Which of the terms you counted for Algorithm 1 are the statistics, and which the N×d tensors?",
     "Split the per-pass bytes into what moves Q and O and what moves ℓ and m; each group gets its own element "
     "size. How many times does a pass touch each statistic?",
     "the N×d part keeps elem_bytes; the statistics' part, read and written on every one of the ⌈N/Bc⌉ passes, "
     "is 2 tensors × 2 moves × N elements × stats_bytes per pass"),
    "check_fa1_hbm_bytes")


def _ex(x):
    with np.errstate(all="ignore"):
        return np.exp(x)


def _tile(m, s):
    m_new = np.maximum(m, s.max(axis=1))
    return m_new, _ex(m - m_new), _ex(s - m_new[:, None]), s.max(axis=1)


def _right(m, l, acc, s, v):
    m2, a, p, _ = _tile(m, s)
    return m2, a * l + p.sum(1), a[:, None] * acc + p @ v


def _no_rescale(m, l, acc, s, v):
    m2, a, p, _ = _tile(m, s)
    return m2, l + p.sum(1), acc + p @ v


def _inverted(m, l, acc, s, v):
    m2, a, p, _ = _tile(m, s)
    inv = _ex(m2 - m)
    return m2, inv * l + p.sum(1), inv[:, None] * acc + p @ v


def _block_max(m, l, acc, s, v):
    m2, a, _, mb = _tile(m, s)
    pb = _ex(s - mb[:, None])
    return m2, a * l + pb.sum(1), a[:, None] * acc + pb @ v


def _acc_factor_forgotten(m, l, acc, s, v):
    m2, a, _, mb = _tile(m, s)
    pb = _ex(s - mb[:, None])
    return m2, a * l + _ex(mb - m2) * pb.sum(1), a[:, None] * acc + pb @ v


def _acc_not_rescaled(m, l, acc, s, v):
    m2, a, p, _ = _tile(m, s)
    return m2, a * l + p.sum(1), acc + p @ v


def _l_not_rescaled(m, l, acc, s, v):
    m2, a, p, _ = _tile(m, s)
    return m2, l + p.sum(1), a[:, None] * acc + p @ v


def _normalised_inside(m, l, acc, s, v):
    m2, a, p, _ = _tile(m, s)
    l2 = a * l + p.sum(1)
    with np.errstate(all="ignore"):
        return m2, l2, ((a * l)[:, None] * acc + p @ v) / l2[:, None]


def _max_not_kept(m, l, acc, s, v):
    m2, a, p, _ = _tile(m, s)
    return m, a * l + p.sum(1), a[:, None] * acc + p @ v


#: known wrong updates, each as a learner writes it, and what it means (05.1's probes compare against them)
_UPDATE_SUSPECTS = (
    ("missing_rescale", _no_rescale, "l and acc are not rescaled when the running max grows: what was summed "
     "under the old max must be multiplied by α = e^(m − m_new)"),
    ("inverted_rescale", _inverted, "l and acc are multiplied by e^(m_new − m), the inverse of the rescale "
     "(from the empty state that is 0·e^(+inf) = NaN): when the max grows, old terms shrink"),
    ("block_max_uncorrected", _block_max, "the tile's P is taken against the tile's own row max and added "
     "without the factor e^(m̃ − m_new) that brings it to the running max"),
    ("acc_factor_forgotten", _acc_factor_forgotten, "l gets the tile's sum times e^(m̃ − m_new), but acc adds "
     "the tile's P V without that factor: l and acc must be relative to the same max"),
    ("acc_not_rescaled", _acc_not_rescaled, "l is rescaled by α = e^(m − m_new), acc is not: the accumulator "
     "was summed under the old max too"),
    ("l_not_rescaled", _l_not_rescaled, "acc is rescaled by α = e^(m − m_new), l is not: the running sum was "
     "summed under the old max too"),
    ("normalised_inside", _normalised_inside, "acc is divided by l inside the loop (FA1's form, O kept "
     "normalised): here acc stays unnormalised and the loop divides by l once, at the end"),
    ("max_not_kept", _max_not_kept, "the returned m is the old running max: the next tile would rescale against "
     "a stale max"),
)


def _probe_update(fn):
    """(key, says) of the known wrong update ``fn`` equals on three probe tiles (from the empty state, a tile that
    raises the max, one that does not), "right" when it equals the right update there, None otherwise."""
    rng = np.random.default_rng(5)
    v = rng.standard_normal((4, 3))
    s1 = np.array([[0.5, 1.0, -1.0, 0.0], [2.0, 0.1, 0.3, -0.5], [0.0, 0.0, 0.0, 0.0]])
    s2 = s1 + np.array([[2.0], [-3.0], [1.5]]) + rng.standard_normal((3, 4))
    states = [(np.full(3, -np.inf), np.zeros(3), np.zeros((3, 3)), s1)]
    m, l, acc = _right(*states[0][:3], s1, v)
    states.append((m, l, acc, s2))
    states.append((*_right(m, l, acc, s2, v), s1))
    got = []
    for m, l, acc, s in states:
        out = call_learner(fn, m.copy(), l.copy(), acc.copy(), s.copy(), v.copy())
        got.append([np.asarray(x, np.float64) for x in out])

    def same(cand):
        for (m, l, acc, s), g in zip(states, got):
            with np.errstate(all="ignore"):
                want = cand(m, l, acc, s, v)
            if len(g) != 3 or any(a.shape != np.shape(b) or not np.allclose(a, b, rtol=1e-5, atol=1e-7,
                                                                            equal_nan=True)
                                  for a, b in zip(g, want)):
                return False
        return True
    if same(_right):
        return "right", ""
    for key, cand, says in _UPDATE_SUSPECTS:
        if same(cand):
            return key, says
    return None


def check_online_block_update(fn, quiet: bool = False) -> Verdict:
    """Exercise 05.1: the update alone on three probe tiles (a known mistake is named), then a whole FA2 forward
    with ``fn`` plugged in (several block shapes, a ragged last block, scores large enough to overflow without the
    max), O against float64 attention."""
    try:
        probe = _probe_update(fn)
    except LearnerError as err:
        return error_verdict(ONLINE_BLOCK_UPDATE, err, "a probe tile of 3 rows", quiet=quiet)
    except (TypeError, ValueError):
        probe = None      # a wrong return shape: the full run below says what it gives
    if probe is not None and probe[0] != "right":
        return verdict(ONLINE_BLOCK_UPDATE, False, f"{probe[1]} (probe tiles: from the empty state, then a tile "
                       "that raises the max)", diagnosis=probe[0], quiet=quiet)
    worst, counters = 0.0, None
    for n, d, br, bc, seed, amp in ((16, 8, 4, 4, 0, 1.0), (37, 16, 8, 16, 1, 1.0), (24, 8, 8, 4, 2, 30.0)):
        where = f"N={n}, d={d}, Br={br}, Bc={bc}"
        q, k, v = random_qkv(n, d, seed, amp)
        try:
            out, counters = fa2_on_memory(q, k, v, br, bc, update=fn)
        except LearnerError as err:
            return error_verdict(ONLINE_BLOCK_UPDATE, err, where, quiet=quiet)
        key, why, ev = diagnose_attention(out, q, k, v, causal=False, tol=1e-4, block_n=bc, block_m=br)
        if key != "passed":
            return verdict(ONLINE_BLOCK_UPDATE, False, f"{why} ({where})", diagnosis=key,
                           table=loop_table(counters, label="the checker's FA2 loop"), quiet=quiet, **ev)
        worst = max(worst, ev["max_error"])
    return verdict(ONLINE_BLOCK_UPDATE, True, f"O matches float64 attention (max error {worst:.2e}); the table is "
                   "the bytes of the checker's FA2 loop your update ran in (your update moves none itself)",
                   table=loop_table(counters, label="the checker's FA2 loop"), max_error=worst, quiet=quiet)


def expected_flash2_counters(n: int, d: int, block_r: int, elem_bytes: int = 4) -> Counters:
    """Per-tensor bytes of the FA2 forward (without the logsumexp): Q once, K and V once per row block, O once."""
    tr = n_blocks(n, block_r)
    c = Counters()
    c.add_read("Q", n * d * elem_bytes)
    c.add_read("K", tr * n * d * elem_bytes)
    c.add_read("V", tr * n * d * elem_bytes)
    c.add_write("O", n * d * elem_bytes)
    return c


def _bytes_diagnosis(by: dict, n: int, br: int, bc: int) -> tuple[str, str]:
    """(key, why) for a loop whose O is right but whose bytes differ from FA2's, in the loop's own terms."""
    def ratio(t, col):
        g, w = by.get(t, (t, 0, 0, 0, 0))[col], by.get(t, (t, 0, 0, 0, 0))[col + 2]
        return g / w if w else (float("inf") if g else 1.0)
    tr, tc = -(-n // br), -(-n // bc)
    if by.get("O", ("O", 0, 0, 0, 0))[1] > 0:
        return "o_read", ("O is read from HBM: FA2 keeps the running output of a row block on chip and only "
                          "stores it; reading O back is FA1's loop order")
    if ratio("O", 2) > 1 and ratio("Q", 1) > 1 and ratio("K", 1) < 1:
        return "fa1_loop_order", (f"Q is read {ratio('Q', 1):.3g}× and O written {ratio('O', 2):.3g}×, K and V once: "
                                  "that is FA1's loop order (outer loop over K/V). FA2 puts the loop over Q blocks "
                                  "outside, so that Q_i and its running output stay on chip")
    if ratio("O", 2) > 1:
        return "extra_stores_O", (f"O is written {ratio('O', 2):.3g}× per row: O_i is stored after every K/V tile "
                                  "instead of once, after the last one (the stores, not the loads, are extra)")
    if ratio("Q", 1) > 1:
        return "q_reloaded", (f"Q is read {ratio('Q', 1):.3g}× (= Tc = {tc} here): Q_i is loaded again for every K/V "
                              "tile, though it can stay on chip for the whole inner loop")
    if ratio("K", 1) > 1 or ratio("V", 1) > 1:
        return "kv_reloaded", (f"K and V are read {ratio('K', 1):.3g}× / {ratio('V', 1):.3g}× what FA2 reads: is a "
                               "tile loaded twice (e.g. once for S and once for P V)?")
    if any(ratio(t, 1) < 1 for t in ("Q", "K", "V")):
        low = [t for t in ("Q", "K", "V") if ratio(t, 1) < 1]
        return "reads_not_counted", (f"{', '.join(low)} moved fewer bytes than the loop needs: data read with "
                                     "mem.hbm(...) or kept from an earlier row block is not a counted load; load "
                                     "every tile with mem.load")
    return "wrong_bytes", "the bytes per tensor differ from FA2's (✘ rows)"


def check_flash2_forward_loop(fn, quiet: bool = False) -> Verdict:
    """Exercise 05.2: O against float64 attention, the bytes per tensor against FA2's
    (:func:`expected_flash2_counters`), on an SRAM that holds just one Q block and one K and one V tile (fp32)."""
    rows = []
    for n, d, br, bc, seed in ((16, 8, 4, 8, 3), (30, 8, 8, 4, 4)):
        where = f"N={n}, d={d}, Br={br}, Bc={bc}"
        q, k, v = random_qkv(n, d, seed)
        mem = Memory(sram_capacity_bytes=(br + 2 * bc) * d * 4, dtype="fp32", record_events=False)
        for nm, x in (("Q", q), ("K", k), ("V", v)):
            mem.put(nm, x)
        mem.empty("O", (n, d))
        want = expected_flash2_counters(n, d, br, 4)
        try:
            call_learner(fn, mem, n, d, br, bc)
        except LearnerError as err:
            if isinstance(err.original, SramCapacityError):
                return sram_overflow_verdict(FLASH2_FORWARD_LOOP, err, mem, where, io_rows(mem.counters, want),
                                             quiet=quiet)
            return error_verdict(FLASH2_FORWARD_LOOP, err, where, quiet=quiet)
        rows = io_rows(mem.counters, want)
        if mem.counters.hbm_bytes == 0:
            return verdict(FLASH2_FORWARD_LOOP, False, f"your loop moved no bytes and O was never written ({where}): "
                           "load tiles with mem.load and store O with mem.store", diagnosis="nothing_moved",
                           table=rows, quiet=quiet)
        key, why, ev = diagnose_attention(mem.hbm("O"), q, k, v, causal=False, tol=1e-4, block_n=bc, block_m=br)
        if key != "passed":
            return verdict(FLASH2_FORWARD_LOOP, False, f"{why} ({where})", diagnosis=key, table=rows, quiet=quiet,
                           **ev)
        differ = io_differs(rows)
        if differ:
            by = {r[0]: r for r in rows}
            parts = [f"{t} {by[t][1]:,} B read / {by[t][2]:,} B written, FA2 moves {by[t][3]:,} / {by[t][4]:,}"
                     for t in differ]
            key, why = _bytes_diagnosis(by, n, br, bc)
            return verdict(FLASH2_FORWARD_LOOP, False, f"O is right but the bytes are not FA2's (✘ rows) at {where}: "
                           + "; ".join(parts) + f". {why}", diagnosis=key, table=rows, quiet=quiet)
    return verdict(FLASH2_FORWARD_LOOP, True, "O is exact and every tensor moved exactly FA2's bytes, within an "
                   "SRAM of one Q block and one K and V tile", table=rows, quiet=quiet)


def fa1_reference_bytes(n: int, d: int, block_c: int, elem_bytes: int = 2,
                        stats_bytes: int | None = None) -> int:
    """FA1 (Algorithm 1) forward HBM bytes, from the simulator's flash1 count, with the statistics in stats_bytes
    (default: the storage dtype, as FA1 §3.1 and Fig. 2 middle count them)."""
    dtypes = {2: "fp16", 4: "fp32"}
    dtype = dtypes[elem_bytes]
    return traffic("flash1", n, d, block_r=min(16, block_c), block_c=block_c, dtype=dtype,
                   stats_dtype=dtypes[stats_bytes or elem_bytes], device="a100", sram_bytes=1 << 30).hbm_bytes


def check_fa1_hbm_bytes(fn, quiet: bool = False) -> Verdict:
    """Exercise 05.3: against the simulator's Algorithm-1 count, on the paper's Fig. 2 sizes with fp32 statistics,
    one case with fp16 statistics, and ragged N."""
    cases = [(1024, 64, 64, 2, 4), (1024, 64, 256, 2, 4), (1000, 64, 128, 2, 4), (77, 16, 32, 4, 4),
             (1024, 64, 128, 2, 2)]

    def tc(n, bc):
        return n_blocks(n, bc)

    def fa1(n, d, bc, b, s, *, kv=2, stats=4, o_writes=1, tiles=None):
        t = tc(n, bc) if tiles is None else tiles
        return kv * n * d * b + t * ((2 + o_writes) * n * d * b + stats * n * s)
    suspects = (Suspect("stats_in_elem_bytes", lambda n, d, bc, b, s: fa1(n, d, bc, b, b),
                        "your statistics are counted in elem_bytes: ℓ and m are stored in stats_bytes"),
                Suspect("stats_moved_once", lambda n, d, bc, b, s: fa1(n, d, bc, b, s, stats=2),
                        "your count moves the statistics 2N per pass: ℓ and m are each read *and* written back "
                        "on every pass, 4N"),
                Suspect("floor_not_ceil", lambda n, d, bc, b, s: fa1(n, d, bc, b, s, tiles=n // bc),
                        "your count uses N // Bc K/V blocks: the ragged last block is a pass too"),
                Suspect("stats_missing", lambda n, d, bc, b, s: fa1(n, d, bc, b, s, stats=0),
                        "your count leaves out the statistics ℓ and m, read and written on every pass"),
                Suspect("kv_per_pass", lambda n, d, bc, b, s: fa1(n, d, bc, b, s, kv=2 * tc(n, bc)),
                        "your count reads K and V on every pass: in Algorithm 1 each K/V block is loaded once"),
                Suspect("o_not_read", lambda n, d, bc, b, s: fa1(n, d, bc, b, s, o_writes=0),
                        "your count writes O on every pass but never reads it back: the inner loop reads O_i to "
                        "update it"))
    return check_cases(FA1_HBM_BYTES, fn, cases, fa1_reference_bytes,
                       header=("N, d, Bc, b, stats b", "Algorithm 1's B", "your B"), suspects=suspects, quiet=quiet)
