"""Wrong answers learners write for chapter 14, each with the diagnosis its checker must give."""
import math


# --- 14.1: the ring's slot and phases -------------------------------------------------------------------------

def ring_swapped(i, stages):
    """Slot and round swapped."""
    slot, r = i // stages, i % stages
    return slot, r % 2, 1 - r % 2


def ring_phase_per_tile(i, stages):
    """The phase flips with every tile."""
    return i % stages, i % 2, (i + 1) % 2


def ring_round_number(i, stages):
    """The round itself, not its parity."""
    r = i // stages
    return i % stages, r, 1 - r


def ring_empty_same(i, stages):
    """The producer waits with the consumers' parity (deadlocks in round 0)."""
    r = i // stages
    return i % stages, r % 2, r % 2


def ring_phases_swapped(i, stages):
    """ready and empty parities swapped."""
    r = i // stages
    return i % stages, (r + 1) % 2, r % 2


def ring_round_off_by_one(i, stages):
    """Counts rounds from 1."""
    r = (i + 1) // stages
    return i % stages, r % 2, 1 - r % 2


# --- 14.2: a longest-first schedule's makespan ----------------------------------------------------------------

def _deal(costs, ctas):
    loads = [0.0] * ctas
    for c in costs:
        loads[loads.index(min(loads))] += c
    return loads


def lpt_unsorted(costs, ctas):
    """Least-loaded CTA, but in the order given."""
    return max(_deal(costs, ctas))


def lpt_stride(costs, ctas):
    """Tile t to CTA t mod P."""
    loads = [0.0] * ctas
    for t, c in enumerate(costs):
        loads[t % ctas] += c
    return max(loads)


def lpt_ascending(costs, ctas):
    """Sorted, but the wrong way."""
    return max(_deal(sorted(costs), ctas))


def lpt_mean(costs, ctas):
    """Perfect balance: the lower bound."""
    return sum(costs) / ctas


def lpt_min(costs, ctas):
    """The least-loaded CTA."""
    return min(_deal(sorted(costs, reverse=True), ctas))


def lpt_longest(costs, ctas):
    """The longest tile."""
    return max(costs)


# --- 14.3: the K and V bytes -------------------------------------------------------------------------------------

def _rows(n, bm, bn, causal, clamp=True):
    rows = 0
    for i in range(math.ceil(n / bm)):
        hi = min((i + 1) * bm, n) if causal else n
        whole = math.ceil(hi / bn) * bn
        rows += min(whole, n) if clamp else whole
    return rows


def kv_per_consumer(n, d, consumers, block_n, causal, elem_bytes):
    """Every consumer fetches its own K/V tiles: the re-reads of 64-row query tiles."""
    return 2 * _rows(n, 64, block_n, causal) * d * elem_bytes


def kv_whole_boxes(n, d, consumers, block_n, causal, elem_bytes):
    """Counts whole K/V tiles, also the rows past N."""
    return 2 * _rows(n, consumers * 64, block_n, causal, clamp=False) * d * elem_bytes


def kv_causal_ignored(n, d, consumers, block_n, causal, elem_bytes):
    """The non-causal count, mask or not."""
    return 2 * _rows(n, consumers * 64, block_n, False) * d * elem_bytes


def kv_once(n, d, consumers, block_n, causal, elem_bytes):
    """K and V once each: the DRAM floor, not the requests."""
    return 2 * n * d * elem_bytes


def kv_k_only(n, d, consumers, block_n, causal, elem_bytes):
    """Forgets V."""
    return _rows(n, consumers * 64, block_n, causal) * d * elem_bytes


def kv_block_n_queries(n, d, consumers, block_n, causal, elem_bytes):
    """Query tiles of block_n rows."""
    return 2 * _rows(n, block_n, block_n, causal) * d * elem_bytes


CATALOGUE = [
    ("14.1", ring_swapped, "slot_and_round_swapped"),
    ("14.1", ring_phase_per_tile, "phase_per_tile"),
    ("14.1", ring_round_number, "round_not_parity"),
    ("14.1", ring_empty_same, "empty_same_as_ready"),
    ("14.1", ring_phases_swapped, "phases_swapped"),
    ("14.1", ring_round_off_by_one, "round_off_by_one"),
    ("14.2", lpt_unsorted, "list_order"),
    ("14.2", lpt_stride, "fixed_stride"),
    ("14.2", lpt_ascending, "shortest_first"),
    ("14.2", lpt_mean, "mean_load"),
    ("14.2", lpt_min, "least_loaded"),
    ("14.2", lpt_longest, "longest_tile"),
    ("14.3", kv_per_consumer, "per_consumer"),
    ("14.3", kv_whole_boxes, "whole_boxes"),
    ("14.3", kv_causal_ignored, "causal_ignored"),
    ("14.3", kv_once, "every_byte_once"),
    ("14.3", kv_k_only, "k_only"),
    ("14.3", kv_block_n_queries, "query_tile_is_block_n"),
]
