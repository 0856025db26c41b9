"""Wrong answers learners write for chapter 14, each with the diagnosis its checker must give."""
import math


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


CATALOGUE = [
    ("14.1", kv_per_consumer, "per_consumer"),
    ("14.1", kv_whole_boxes, "whole_boxes"),
    ("14.1", kv_causal_ignored, "causal_ignored"),
    ("14.2", lambda s, n, d, b, h: min(h, max(1, s // (n * d * b))), "k_only"),
    ("14.2", lambda s, n, d, b, h: min(h, s // (2 * n * d * b)), "no_floor"),
    ("14.2", lambda s, n, d, b, h: max(1, s // (2 * n * d * b)), "no_cap"),
]
