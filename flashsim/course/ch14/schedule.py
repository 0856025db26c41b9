"""Chapter 14's persistent tile scheduling, in plain Python: which query tiles a persistent grid of CTAs runs, in
what order, and how long the busiest CTA works (the makespan).

- :func:`persistent_tile_order`: the Gluon forward's tile list (:func:`flashsim.kernels.gluon.fwd_tile_list`, the
  host's copy of the kernel's ``_tile_coords``): heads in L2-sized groups, query blocks longest first.
- :func:`tile_costs`: what each tile of that list costs, in K/V tiles visited plus what a tile pays once
  (:func:`flashsim.kernels.gluon.fwd_tile_kv_tiles`, :data:`flashsim.kernels.gluon.TILE_OVERHEAD_KV_TILES`).
- :func:`deal`: the tiles dealt to P CTAs by a fixed stride, greedily in list order, or longest first to the
  least-loaded CTA (LPT, :func:`flashsim.kernels.gluon.balanced_tile_lists`), with each CTA's load and the makespan.
"""
from __future__ import annotations

from flashsim.errors import FlashsimError
from flashsim.kernels.gluon import (TILE_OVERHEAD_KV_TILES, balanced_tile_lists, fwd_tile_kv_tiles,  # numpy only
                                    fwd_tile_list)

__all__ = ["persistent_tile_order", "tile_costs", "deal", "RULES"]

#: how :func:`deal` hands tiles to CTAs: name -> what it does
RULES = {"stride": "tile t to CTA t mod P, in list order (a fixed stride)",
         "greedy": "each tile, in list order, to the CTA whose tiles so far cost least",
         "lpt": "the longest tile first, each to the CTA whose tiles so far cost least (LPT)"}


def persistent_tile_order(heads: int, query_blocks: int, heads_per_group: int) -> list[tuple[int, int]]:
    """The order of the Gluon forward's tile list (chapter 14): (head, query block) pairs, the heads cut into groups
    of `heads_per_group` whose K and V fit in the L2 together; within a group, query blocks from the last (the
    longest under a causal mask) to the first, heads inner (:func:`flashsim.kernels.gluon.fwd_tile_list`)."""
    if heads < 1 or query_blocks < 1 or heads_per_group < 1:
        raise FlashsimError(f"heads={heads}, query_blocks={query_blocks}, heads_per_group={heads_per_group}: "
                            "each must be at least 1")
    bh, mblk = fwd_tile_list(heads, query_blocks, min(heads_per_group, heads))
    return list(zip(bh.tolist(), mblk.tolist()))


def tile_costs(query_blocks: int, heads: int = 1, causal: bool = True, longest_first: bool = True,
               overhead: float = TILE_OVERHEAD_KV_TILES) -> list[float]:
    """The cost of every tile of a (heads × query_blocks) grid, in the order of :func:`persistent_tile_order`
    with all heads in one group (longest first), or reversed (``longest_first=False``: shortest first, the order a
    plain launch starts programs in). A tile costs the K/V tiles it visits (square tiles: query block i of a
    causal grid visits i + 1, else all of them) plus `overhead` for what it pays once (its Q, its first scores,
    its epilogue)."""
    if query_blocks < 1 or heads < 1:
        raise FlashsimError(f"query_blocks={query_blocks}, heads={heads}: both must be at least 1")
    if overhead < 0:
        raise FlashsimError(f"overhead={overhead}: a tile's fixed cost cannot be negative")
    block = 128
    kv = fwd_tile_kv_tiles(query_blocks * block, heads, query_blocks, heads, bool(causal), block, block)
    costs = [float(x) + overhead for x in kv.tolist()]
    return costs if longest_first else costs[::-1]


def deal(costs, ctas: int, rule: str = "lpt") -> dict:
    """Hand the tiles (their `costs`, in list order) to `ctas` persistent CTAs by `rule` (one of :data:`RULES`).

    Returns {"owner": [CTA of each tile], "tiles": [[tile indices of CTA p, in the order it runs them]], "loads":
    [summed cost per CTA], "makespan" (the largest load: when the last CTA finishes), "bound" (no schedule can
    finish before max(the longest tile, total / ctas))}."""
    costs = [float(c) for c in costs]
    if rule not in RULES:
        raise FlashsimError(f"rule={rule!r}: one of {', '.join(RULES)}")
    if not costs or any(not (c >= 0) for c in costs):
        raise FlashsimError("costs: give at least one tile, each cost a number >= 0")
    if not 1 <= ctas:
        raise FlashsimError(f"ctas={ctas}: at least one CTA")
    p = min(ctas, len(costs))
    if rule == "stride":
        owner = [t % p for t in range(len(costs))]
    else:
        order, start = balanced_tile_lists(costs, p, "list" if rule == "greedy" else "lpt")
        owner = [0] * len(costs)
        for q in range(p):
            for t in order[start[q]:start[q + 1]].tolist():
                owner[t] = q
    tiles = [[t for t in range(len(costs)) if owner[t] == q] for q in range(ctas)]
    loads = [sum(costs[t] for t in ts) for ts in tiles]
    return {"owner": owner, "tiles": tiles, "loads": loads, "makespan": max(loads),
            "bound": max(max(costs), sum(costs) / ctas)}
