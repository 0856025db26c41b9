"""Chapter 14's two schedules, in plain Python to draw: the Gluon forward's persistent tile order, and a picture of
how its warp roles share the tensor cores.

- :func:`persistent_tile_order`: the kernel's tile list (:func:`flashsim.kernels.gluon.fwd_tile_list`, the host's copy
  of ``_tile_coords`` in :mod:`flashsim.kernels.gluon.fwd_sm90`).
- :func:`warp_schedule`: an idealised timeline of one query tile's K/V loop under three ways of ordering the work
  (one program in order, as the Triton kernel; two consumer warpgroups each overlapping its softmax with its
  previous P·V product; the same with ping-pong turns). The durations are chosen for the picture, not measured:
  it shows what each ordering makes possible, not what the GPU does.
"""
from __future__ import annotations

from flashsim.errors import FlashsimError
from flashsim.kernels.gluon import fwd_tile_list     # numpy only: imports nothing heavy

__all__ = ["persistent_tile_order", "warp_schedule", "SCHEDULES"]

#: the orderings :func:`warp_schedule` draws
SCHEDULES = ("in order", "overlap", "ping-pong")


def persistent_tile_order(heads: int, query_blocks: int, heads_per_group: int) -> list[tuple[int, int]]:
    """The order of the Gluon forward's tile list (chapter 14): (head, query block) pairs, the heads cut into groups
    of `heads_per_group` whose K and V fit in the L2 together; within a group, query blocks from the last (the
    longest under a causal mask) to the first, heads inner (:func:`flashsim.kernels.gluon.fwd_tile_list`, the
    kernel's rule). Without a mask the persistent CTAs take the list with a fixed stride (tile t to CTA t mod CTAs);
    under a causal mask the host deals it out longest first to the least-loaded CTA
    (:func:`flashsim.kernels.gluon.balanced_tile_lists`), and each CTA runs its tiles in list order."""
    if heads < 1 or query_blocks < 1 or heads_per_group < 1:
        raise FlashsimError(f"heads={heads}, query_blocks={query_blocks}, heads_per_group={heads_per_group}: "
                            "each must be at least 1")
    bh, mblk = fwd_tile_list(heads, query_blocks, min(heads_per_group, heads))
    return list(zip(bh.tolist(), mblk.tolist()))


def warp_schedule(mode: str, kv_tiles: int = 4, matmul: float = 1.0, softmax: float = 1.5,
                  load: float = 0.6) -> dict:
    """An idealised timeline of one 128-row query tile over `kv_tiles` K/V tiles (chapter 14).

    The tensor cores run one matmul at a time, in the order they were issued; a 64-row S = QKᵀ or P·V product takes
    `matmul`, a 64-row softmax `softmax` (on the warps that issued it, not on the tensor cores), a TMA copy `load`.

    - ``"in order"``: one program of 128 rows, as the Triton kernel: S_j, wait, softmax_j, P_j·V_j, wait.
    - ``"overlap"``: two consumer warpgroups of 64 rows; each issues S_j together with P_{j-1}·V_{j-1} and runs
      softmax_j while that product is still on the tensor cores; they issue whenever they are ready.
    - ``"ping-pong"``: the same, but the consumers issue in strict turns.

    Returns {"mode", "lanes": [lane names], "bars": [(lane, start, duration, label, kind)] with kind in "load",
    "qk", "pv", "softmax", "end" (the time the last product ends), "tensor_busy" (fraction of [0, end] the tensor
    cores work)}.
    """
    if mode not in SCHEDULES:
        raise FlashsimError(f"mode={mode!r}: use one of {SCHEDULES}")
    if kv_tiles < 1:
        raise FlashsimError(f"kv_tiles={kv_tiles}: at least one K/V tile")
    bars = []
    tc_free = 0.0
    need_k: dict = {}
    need_v: dict = {}
    if mode == "in order":
        t = 0.0
        for j in range(kv_tiles):
            s0 = max(t, tc_free)
            bars.append(("tensor cores", s0, 2 * matmul, f"S{j}", "qk"))
            need_k[j] = s0
            sm0 = s0 + 2 * matmul
            bars.append(("program (128 rows)", sm0, 2 * softmax, f"softmax {j}", "softmax"))
            p0 = sm0 + 2 * softmax
            bars.append(("tensor cores", p0, 2 * matmul, f"PV{j}", "pv"))
            need_v[j] = p0
            t = tc_free = p0 + 2 * matmul
        lanes = ["producer (loads)", "program (128 rows)", "tensor cores"]
    else:
        consumers = 2
        ready = [0.0] * consumers
        step = [0] * consumers                 # next issue of consumer c: S_step (+ PV_{step-1})
        turn, last_issue = 0, 0.0
        while min(step) <= kv_tiles:
            if mode == "ping-pong":
                c = turn
                if step[c] > kv_tiles:
                    c = 1 - c
                issue = max(ready[c], last_issue)
            else:
                live = [c for c in range(consumers) if step[c] <= kv_tiles]
                c = min(live, key=lambda c: (ready[c], c))
                issue = ready[c]
            j = step[c]
            lane = f"consumer {c} (64 rows)"
            start = max(issue, tc_free)
            s_end = start
            if j < kv_tiles:
                bars.append(("tensor cores", start, matmul, f"S{j}·c{c}", "qk"))
                need_k[j] = min(need_k.get(j, start), start)
                s_end = start + matmul
            pv_end = s_end
            if j > 0:
                bars.append(("tensor cores", s_end, matmul, f"PV{j - 1}·c{c}", "pv"))
                need_v[j - 1] = min(need_v.get(j - 1, s_end), s_end)
                pv_end = s_end + matmul
            tc_free = pv_end
            sm_end = s_end
            if j < kv_tiles:
                bars.append((lane, s_end, softmax, f"softmax {j}", "softmax"))
                sm_end = s_end + softmax
            ready[c] = max(sm_end, pv_end)
            step[c] += 1
            turn, last_issue = 1 - c, issue
        lanes = ["producer (loads)", "consumer 0 (64 rows)", "consumer 1 (64 rows)", "tensor cores"]
    for j in range(kv_tiles):                  # each TMA copy just in time for its first use (drawn, not timed)
        bars.append(("producer (loads)", max(0.0, need_k[j] - load), load, f"K{j}", "load"))
        bars.append(("producer (loads)", max(0.0, need_v[j] - load), load, f"V{j}", "load"))
    end = max(s + d for lane, s, d, _, kind in bars if kind in ("qk", "pv"))
    busy = sum(d for lane, s, d, _, kind in bars if kind in ("qk", "pv"))
    return {"mode": mode, "lanes": lanes, "bars": bars, "end": end, "tensor_busy": busy / end}
