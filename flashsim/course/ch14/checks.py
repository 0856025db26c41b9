"""Chapter 14 exercises: the ring's slots and barrier phases, a longest-first schedule's makespan, and the
warp-specialized kernel's K and V bytes.

Each ``check_...(fn)`` runs the learner's function on a table of cases against the model (:mod:`.ring`,
:mod:`.schedule`, the kernel view :mod:`flashsim.model.kernel_io`), prints a verdict and the table, and returns a
:class:`~flashsim.course.kit.checker.Verdict`.
"""
from __future__ import annotations

from flashsim.course.ch14.ring import ring_slot_phase
from flashsim.course.ch14.schedule import deal, tile_costs
from flashsim.course.kit.checker import Suspect, Verdict, check_cases, exercise
from flashsim.model.attention.visibility import n_blocks, visible_col_blocks
from flashsim.model.kernel_io import kernel_io

__all__ = ["check_ring_slot_phase", "check_lpt_makespan", "check_gluon_kv_bytes"]

#: query rows of one consumer warpgroup
ROWS_PER_CONSUMER = 64
_DTYPE = {2: "fp16", 4: "fp32"}

RING = exercise(
    "14.1", "a ring's slot and barrier phases",
    "fn(i, stages) -> (slot, ready_phase, empty_phase) for the i-th K/V tile (i = 0, 1, ...) through a ring of "
    "`stages` slots: the slot it lands in, the phase bit a consumer waits for on that slot's ready barrier, and the "
    "phase bit the producer waits for on its empty barrier before copying it.",
    ("Which tiles share a slot, and how many times has that slot's ready barrier completed before tile i lands?",
     "The phase bit flips at each completion, so a waiter asks for the parity of the completion it needs. The "
     "producer's first wait on a slot must pass at once: nothing has used the slot yet.",
     "Work out the round r in which tile i uses its slot first; both waits then depend only on r's parity, and "
     "the producer's is the opposite of the consumer's. Check your rule on i = 0 and i = stages."),
    "check_ring_slot_phase")

LPT = exercise(
    "14.2", "a longest-first schedule's makespan",
    "fn(costs, ctas) -> when the last of `ctas` persistent CTAs finishes, if the tiles (their costs, a list) are "
    "dealt out longest first, each to the CTA whose tiles so far cost least, and each CTA runs its tiles back to "
    "back.",
    ("What does each CTA hold after the deal, and which CTA decides when the grid is done?",
     "Sort the costs from the largest down; keep one running load per CTA; give each tile to the smallest load. "
     "Ties between equal loads do not change the answer.",
     "Simulate the deal with one running total per CTA, all starting at zero; after the last tile, the answer is "
     "one of those totals. Which one?"),
    "check_lpt_makespan")

GLUON_KV = exercise(
    "14.3", "the warp-specialized kernel's K and V bytes",
    "fn(n, d, consumers, block_n, causal, elem_bytes) -> the bytes of K plus V that one head's warp-specialized "
    "forward requests from global memory, counting only rows below N, when its query tile is consumers × 64 rows "
    "and its K/V tiles are block_n rows.",
    ("How many query tiles does one head have, and does each consumer fetch its own copy of a K/V tile?",
     "The consumers of one CTA share every K/V slot: the kernel is chapter 05's FA2 forward with B_r = "
     "consumers × 64. Causal: which K/V tiles does query tile i visit (chapter 08)?",
     "Loop over the query tiles; for each, count the K/V tiles it visits (all of them, or with the mask only "
     "those up to its last row), then the rows of those tiles that lie below N, times d, b and the two tensors."),
    "check_gluon_kv_bytes")


# --- 14.1 ---------------------------------------------------------------------------------------------------------

def check_ring_slot_phase(fn, quiet: bool = False) -> Verdict:
    """Exercise 14.1: slot and phase bits of the i-th tile through a ring (:func:`.ring.ring_slot_phase`)."""
    cases = [(0, 2), (1, 2), (2, 2), (3, 2), (5, 3), (7, 3), (4, 1), (13, 4), (9, 2)]
    suspects = (
        Suspect("slot_and_round_swapped", lambda i, s: (i // s, (i % s) % 2, 1 - (i % s) % 2),
                "your slot is the round and your round the slot: tile i goes to slot i mod stages, and the round "
                "(how often that slot has been filled before) is i // stages"),
        Suspect("phase_per_tile", lambda i, s: (i % s, i % 2, 1 - i % 2),
                "your phase flips with every tile: it flips each time *this slot's* barrier completes, once per "
                "round of the ring, so it depends on i // stages"),
        Suspect("round_not_parity", lambda i, s: (i % s, i // s, 1 - i // s),
                "your phase is the round number itself: a barrier has one phase bit, so a waiter gives the round's "
                "parity (round mod 2)"),
        Suspect("empty_same_as_ready", lambda i, s: (i % s, (i // s) % 2, (i // s) % 2),
                "your producer waits on empty with the consumers' parity: in round 0 it would wait for a release "
                "that never comes (nobody has read the slot yet) and the ring deadlocks; its parity is the opposite"),
        Suspect("phases_swapped", lambda i, s: (i % s, 1 - (i // s) % 2, (i // s) % 2),
                "your two phase bits are swapped: consumers wait for ready with the round's parity, the producer "
                "waits for empty with the opposite one"),
        Suspect("round_off_by_one", lambda i, s: (i % s, ((i + 1) // s) % 2, 1 - ((i + 1) // s) % 2),
                "your round is off by one: tile i is in round i // stages (tiles 0 .. stages−1 are round 0)"))
    return check_cases(RING, fn, cases, lambda i, s: tuple(ring_slot_phase(i, s)),
                       header=("i, stages", "(slot, ready, empty)", "yours"),
                       describe=lambda i, s: f"tile {i}, {s} slots", suspects=suspects, quiet=quiet)


# --- 14.2 ---------------------------------------------------------------------------------------------------------

def _lpt(costs, ctas):
    return deal(costs, ctas, "lpt")["makespan"]


def _stride(costs, ctas):
    return deal(costs, ctas, "stride")["makespan"]


def _greedy(costs, ctas):
    return deal(costs, ctas, "greedy")["makespan"]


def _shortest_first(costs, ctas):
    return deal(sorted(costs), ctas, "greedy")["makespan"]


def check_lpt_makespan(fn, quiet: bool = False) -> Verdict:
    """Exercise 14.2: the makespan of longest-first dealing (:func:`.schedule.deal` with rule "lpt")."""
    causal = tile_costs(8, heads=2)                         # longest first already: 9, 9, 8, 8, ...
    cases = [(tile_costs(8, heads=2, longest_first=False), 5), (causal, 3), ([3, 3, 2, 2, 2], 2),
             (tile_costs(6, heads=3, longest_first=False), 4), ([5, 1, 1, 1, 1, 1, 4, 4], 3),
             (tile_costs(4, heads=1, causal=False), 3), ([7], 4)]
    suspects = (
        Suspect("list_order", _greedy,
                "you deal the tiles in the order given, not longest first: a long tile that comes last lands on "
                "a CTA that is already busy"),
        Suspect("fixed_stride", _stride,
                "you give tile t to CTA t mod P: every CTA gets as many tiles, not as much work"),
        Suspect("shortest_first", _shortest_first,
                "you deal the shortest tiles first: the long ones come last and stick out past the others"),
        Suspect("mean_load", lambda costs, ctas: sum(costs) / ctas,
                "you return the total divided by the CTAs: that is a lower bound no schedule beats, not what "
                "this one achieves"),
        Suspect("least_loaded", lambda costs, ctas: min(deal(costs, ctas, "lpt")["loads"]),
                "you return the least-loaded CTA's time: the grid is done when its busiest CTA is"),
        Suspect("longest_tile", lambda costs, ctas: max(costs),
                "you return the longest tile: a CTA runs several tiles one after another"))
    return check_cases(LPT, fn, cases, _lpt, rel=1e-9, header=("tiles, CTAs", "makespan", "yours"),
                       describe=lambda costs, ctas: f"{len(costs)} tiles (costs {_costs(costs)}), {ctas} CTAs",
                       suspects=suspects, quiet=quiet)


def _costs(costs) -> str:
    text = ", ".join(f"{c:g}" for c in costs[:5])
    return text + (", …" if len(costs) > 5 else "")


# --- 14.3 ---------------------------------------------------------------------------------------------------------

def _kv_bytes(n, d, consumers, block_n, causal, elem_bytes):
    (launch,) = kernel_io("flash_fwd", n, d, consumers * ROWS_PER_CONSUMER, block_n, causal=causal,
                          dtype=_DTYPE[elem_bytes]).launches
    return launch.loads["K"] + launch.loads["V"]


def _kv_boxes(n, d, consumers, block_n, causal, elem_bytes):
    """Whole TMA boxes: J_i · block_n rows per query tile, also past N (what TMA copies, not the kernel view)."""
    bm = consumers * ROWS_PER_CONSUMER
    rows = sum(int(visible_col_blocks(i, bm, block_n, n, causal)) * block_n for i in range(n_blocks(n, bm)))
    return 2 * rows * d * elem_bytes


def check_gluon_kv_bytes(fn, quiet: bool = False) -> Verdict:
    """Exercise 14.3: K + V bytes of one head's warp-specialized forward, against the kernel view with
    B_r = consumers · 64."""
    cases = [(4096, 128, 2, 128, False, 2), (2048, 64, 3, 128, False, 2), (4096, 64, 2, 128, True, 2),
             (1000, 128, 2, 128, True, 2), (2085, 64, 3, 128, False, 4), (1536, 64, 2, 64, True, 2)]
    suspects = (
        Suspect("per_consumer", lambda n, d, c, bn, causal, b: _kv_bytes(n, d, 1, bn, causal, b),
                "your bytes are those of 64-row query tiles: the consumers of one CTA share each K/V slot, so a K/V "
                "tile is copied once per consumers × 64 query rows"),
        Suspect("whole_boxes", _kv_boxes,
                "you count whole K/V tiles, also their rows past N: TMA does copy whole boxes, but the kernel view "
                "counts only the rows below N (the spec's count)"),
        Suspect("causal_ignored", lambda n, d, c, bn, causal, b: _kv_bytes(n, d, c, bn, False, b),
                "your causal counts are the non-causal ones: a causal query tile visits only the K/V tiles up to "
                "its last row"),
        Suspect("every_byte_once", lambda n, d, c, bn, causal, b: 2 * n * d * b,
                "you count K and V once: that is what the DRAM may see when the L2 keeps them, but every query "
                "tile requests its own copy of each K/V tile it visits"),
        Suspect("k_only", lambda n, d, c, bn, causal, b: _kv_bytes(n, d, c, bn, causal, b) // 2,
                "you count K only: each visited K/V tile brings K_j and V_j"),
        Suspect("query_tile_is_block_n", lambda n, d, c, bn, causal, b: _kv_bytes(n, d, bn // ROWS_PER_CONSUMER,
                                                                                 bn, causal, b),
                "your query tiles are block_n rows: a CTA's query tile is consumers × 64 rows, whatever the K/V "
                "tile's size"))
    return check_cases(GLUON_KV, fn, cases, _kv_bytes, header=("n, d, consumers, block_n, causal, b", "kernel view",
                                                               "yours"),
                       describe=lambda n, d, c, bn, causal, b: f"N={n}, d={d}, {c} consumers, block_n={bn}, "
                                                               f"{'causal' if causal else 'full'}, b={b}",
                       suspects=suspects, quiet=quiet)
