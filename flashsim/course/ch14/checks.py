"""Chapter 14 exercises: the Gluon kernel's K and V bytes, and how many heads fit in one L2 group.

Each ``check_...(fn)`` runs the learner's function on a table of cases against the model (the kernel view,
:mod:`flashsim.model.kernel_io`), prints a verdict and the table, and returns a
:class:`~flashsim.course.kit.checker.Verdict`.
"""
from __future__ import annotations

from flashsim.course.kit.checker import Suspect, Verdict, check_cases, exercise
from flashsim.model.attention.visibility import n_blocks, visible_col_blocks
from flashsim.model.kernel_io import kernel_io

__all__ = ["check_gluon_kv_bytes", "check_heads_per_group"]

#: query rows of one consumer warpgroup of the Gluon forward
ROWS_PER_CONSUMER = 64
_DTYPE = {2: "fp16", 4: "fp32"}

GLUON_KV = exercise(
    "14.1", "the Gluon kernel's K and V bytes",
    "fn(n, d, consumers, block_n, causal, elem_bytes) -> the bytes of K plus V that one head's Gluon forward "
    "requests from global memory, counting only rows below N, when its query tile is consumers × 64 rows and its "
    "K/V tiles are block_n rows.",
    ("How many query tiles does one head have, and does each consumer fetch its own copy of a K/V tile?",
     "The consumers of one CTA share every K/V slot: the kernel is chapter 05's FA2 forward with BLOCK_M = "
     "consumers × 64. Causal: which K/V tiles does query tile i visit (chapter 08)?",
     "Σ over query tiles i of 2 · min(J_i · block_n, N) · d · b, with J_i = ⌈min((i+1)·B_M, N) / block_n⌉ "
     "(J_i = ⌈N / block_n⌉ without the mask) and B_M = consumers × 64"),
    "check_gluon_kv_bytes")

HEADS_PER_GROUP = exercise(
    "14.2", "heads per L2 group",
    "fn(section_bytes, n, d, elem_bytes, heads) -> how many heads the Gluon forward's persistent order puts in one "
    "group: as many heads as fit their K and V in section_bytes, at least one, at most all of them.",
    ("What must the L2 hold for one head, while that head's query tiles run?",
     "One head's K and V are two N × d matrices; divide and round down, then think of N so large that not even one "
     "head fits, and of fewer heads than would fit.",
     "min(heads, max(1, section_bytes // (2 · N · d · b)))"),
    "check_heads_per_group")


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
    """Exercise 14.1: K + V bytes of one head's Gluon forward, against the kernel view with BLOCK_M = consumers·64."""
    cases = [(4096, 128, 2, 128, False, 2), (2048, 64, 3, 128, False, 2), (4096, 64, 2, 128, True, 2),
             (1000, 128, 2, 128, True, 2), (2085, 64, 3, 128, False, 4)]
    suspects = (
        Suspect("per_consumer", lambda n, d, c, bn, causal, b: _kv_bytes(n, d, 1, bn, causal, b),
                "your bytes are those of 64-row query tiles: the consumers of one CTA share each K/V slot, so a K/V "
                "tile is copied once per consumers × 64 query rows"),
        Suspect("whole_boxes", _kv_boxes,
                "you count whole K/V tiles, also their rows past N: TMA does copy whole boxes, but the kernel view "
                "counts only the rows below N (the spec's count)"),
        Suspect("causal_ignored", lambda n, d, c, bn, causal, b: _kv_bytes(n, d, c, bn, False, b),
                "your causal counts are the non-causal ones: a causal query tile visits only the K/V tiles up to "
                "its last row"))
    return check_cases(GLUON_KV, fn, cases, _kv_bytes, header=("n, d, consumers, block_n, causal, b", "kernel view",
                                                               "yours"),
                       describe=lambda n, d, c, bn, causal, b: f"N={n}, d={d}, {c} consumers, BLOCK_N={bn}, "
                                                               f"{'causal' if causal else 'full'}, b={b}",
                       suspects=suspects, quiet=quiet)


def _heads(section_bytes, n, d, elem_bytes, heads):
    return min(heads, max(1, section_bytes // (2 * n * d * elem_bytes)))


def check_heads_per_group(fn, quiet: bool = False) -> Verdict:
    """Exercise 14.2: heads per L2 group of the Gluon forward's persistent order (the rule of its launcher)."""
    mib = 2 ** 20
    cases = [(20 * mib, 2048, 128, 2, 128), (20 * mib, 16384, 128, 2, 16), (20 * mib, 16384, 64, 2, 32),
             (20 * mib, 131072, 128, 2, 16), (20 * mib, 1024, 64, 2, 8), (40 * mib, 4096, 128, 4, 64)]
    suspects = (
        Suspect("k_only", lambda s, n, d, b, h: min(h, max(1, s // (n * d * b))),
                "your groups hold twice as many heads as fit: a head's query tiles read its K and its V"),
        Suspect("no_floor", lambda s, n, d, b, h: min(h, s // (2 * n * d * b)),
                "you give 0 heads when one head's K and V exceed the section: a group still needs one head"),
        Suspect("no_cap", lambda s, n, d, b, h: max(1, s // (2 * n * d * b)),
                "your group can hold more heads than there are: cap it at the number of heads"))
    return check_cases(HEADS_PER_GROUP, fn, cases, _heads,
                       header=("section, N, d, b, heads", "heads per group", "yours"),
                       describe=lambda s, n, d, b, h: f"{s // mib} MiB, N={n}, d={d}, b={b}, {h} heads",
                       suspects=suspects, quiet=quiet)
