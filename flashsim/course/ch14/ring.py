"""Chapter 14's model of one CTA of a warp-specialized forward: a producer warp filling a ring of shared-memory
slots with K/V tiles, consumer warpgroups emptying it, mbarriers between them, and the tensor cores they share.

- :func:`ring_slot_phase`: which slot the i-th K/V tile uses and which phase bit each side waits on (the rule the
  Gluon forward writes as ``kc % STAGES`` and ``(kc // STAGES) & 1``, :mod:`flashsim.kernels.gluon.fwd_sm90`).
- :func:`pipeline_timeline`: a small discrete-event simulation of that CTA over one query tile per consumer. The
  durations are parameters in arbitrary units, not measurements: the timeline shows what the ring depth, the
  number of consumers and ping-pong make possible, not what a particular GPU does.

The model, in one paragraph: three kinds of hardware work side by side on an SM. The copy engine (TMA) moves a
K/V tile into a slot (``load`` per tile, one copy after another: the bandwidth is shared). The tensor cores run one
matrix product at a time, in the order they were issued (``mma`` per 64-row product). A consumer's own warps
compute its softmax (``softmax`` per 64-row tile), which the tensor cores cannot help with. A consumer issues
S_j = Q K_jᵀ, waits for it, computes the softmax, issues O += P_j V_j and, without waiting for that product, moves
on to S_{j+1}; once P_j V_j has run it arrives on the slot's ``empty`` barrier. The producer refills a slot only
when every consumer has arrived. Without ping-pong the consumers run in step: products issued at the same moment
share the tensor cores and end together (consumers × mma). With ping-pong they issue in strict turns.
"""
from __future__ import annotations

from flashsim.errors import FlashsimError

__all__ = ["ring_slot_phase", "pipeline_timeline", "LANE_KINDS"]

#: the kinds of bars :func:`pipeline_timeline` returns, and what each is
LANE_KINDS = {"load": "TMA copy of K_j, V_j", "qk": "S = QKᵀ (tensor cores)", "pv": "O += PV (tensor cores)",
              "softmax": "softmax (the consumer's warps)", "wait": "waiting on an mbarrier"}


def ring_slot_phase(i: int, stages: int) -> tuple[int, int, int]:
    """(slot, ready_phase, empty_phase) of the i-th K/V tile (i = 0, 1, ...) through a ring of `stages` slots.

    The tile goes to slot ``i mod stages``, in round ``r = i // stages`` of the ring. A barrier's phase bit flips each
    time it completes, so a waiter names the parity it waits for: consumers wait on the slot's ``ready`` barrier
    for parity ``r mod 2`` (its (r+1)-th completion); the producer waits on ``empty`` for the opposite parity,
    ``1 - r mod 2``: in round 0 the slot has never been filled and that wait passes at once, in round r >= 1 it
    waits for the consumers' release of round r - 1."""
    if stages < 1 or i < 0:
        raise FlashsimError(f"i={i}, stages={stages}: the ring needs stages >= 1 and a tile index i >= 0")
    r = i // stages
    return i % stages, r % 2, 1 - r % 2


def _check(stages, consumers, kv_tiles, load, mma, softmax):
    if not 1 <= stages <= 8:
        raise FlashsimError(f"stages={stages}: the ring has 1 to 8 slots (shared memory holds a few K/V tiles)")
    if not 1 <= consumers <= 4:
        raise FlashsimError(f"consumers={consumers}: 1 to 4 consumer warpgroups")
    if not 1 <= kv_tiles <= 64:
        raise FlashsimError(f"kv_tiles={kv_tiles}: 1 to 64 K/V tiles")
    for name, v in (("load", load), ("mma", mma), ("softmax", softmax)):
        if not (isinstance(v, (int, float)) and v > 0 and v < 1e6):
            raise FlashsimError(f"{name}={v!r}: a duration must be a positive number")


def pipeline_timeline(stages: int = 2, consumers: int = 2, kv_tiles: int = 6, *, load: float = 1.0,
                      mma: float = 1.0, softmax: float = 1.5, pingpong: bool = False) -> dict:
    """Simulate one CTA of the warp-specialized forward (chapter 14): each of `consumers` warpgroups owns 64 query
    rows and walks `kv_tiles` K/V tiles, fed through a ring of `stages` slots by one producer.

    Returns {"bars": [(lane, start, duration, label, kind)], "lanes": [lane names, top to bottom], "end" (when the
    last product finishes), "tensor_busy" (fraction of [0, end] the tensor cores work), "producer_wait" (time the
    producer waits for a free slot), "consumer_wait" (summed time consumers wait for a full slot or their turn),
    "phases": [(tile, slot, ready_phase, empty_phase)], "params": the arguments}."""
    _check(stages, consumers, kv_tiles, load, mma, softmax)
    # who issues together: without ping-pong the consumers run in step and share the tensor cores (their products,
    # issued at the same moment, all finish after consumers × mma); with it each issues alone, in turns
    groups = [[c] for c in range(consumers)] if pingpong else [list(range(consumers))]
    bars: list = []
    ready: dict = {}                      # tile -> when its slot's ready barrier completes (the copy has landed)
    released: dict = {}                   # tile -> when the last consumer arrives on its slot's empty barrier
    pv_end: dict = {}                     # (group, tile) -> when its P·V product ends
    producer_t = producer_wait = consumer_wait = 0.0
    loaded = 0                            # tiles the producer has copied
    tc_free = 0.0                         # the tensor cores take products in issue order
    nxt = [("S", 0, 0.0) for _ in groups]  # each group's next product: (kind, tile, earliest issue)
    turn, last_s = 0, 0.0                 # ping-pong: whose S goes next, and when the last S was issued
    while True:
        while loaded < kv_tiles:          # the producer refills a slot once every consumer has released it
            prev = loaded - stages
            if prev >= 0 and prev not in released:
                break
            start = max(producer_t, released.get(prev, 0.0))
            if start > producer_t:
                bars.append(("producer", producer_t, start - producer_t, "wait", "wait"))
                producer_wait += start - producer_t
            bars.append(("producer", start, load, f"KV{loaded}", "load"))
            ready[loaded] = producer_t = start + load
            loaded += 1
        options = []
        for g, (kind, j, t) in enumerate(nxt):
            if j >= kv_tiles:
                continue
            if kind == "S":
                if j not in ready or (pingpong and g != turn):
                    continue
                t = max(t, ready[j], last_s)
            options.append((t, g))
        if not options:
            break
        issue, g = min(options)
        kind, j, t = nxt[g]
        who = "+".join(f"c{c}" for c in groups[g])
        start = max(issue, tc_free)
        tc_free = start + mma * len(groups[g])
        if kind == "S":
            for c in groups[g]:
                if issue > t:
                    bars.append((f"consumer {c}", t, issue - t, "wait", "wait"))
                    consumer_wait += issue - t
                bars.append((f"consumer {c}", tc_free, softmax, f"softmax {j}", "softmax"))
            bars.append(("tensor cores", start, tc_free - start, f"S{j} {who}", "qk"))
            nxt[g] = ("PV", j, tc_free + softmax)
            last_s, turn = issue, (g + 1) % len(groups)
        else:
            bars.append(("tensor cores", start, tc_free - start, f"PV{j} {who}", "pv"))
            pv_end[g, j] = tc_free
            if all((k, j) in pv_end for k in range(len(groups))):
                released[j] = max(pv_end[k, j] for k in range(len(groups)))
            nxt[g] = ("S", j + 1, issue)  # the wgmma is asynchronous: the consumer issues its next S at once
        while nxt[turn][1] >= kv_tiles and any(n[1] < kv_tiles for n in nxt):
            turn = (turn + 1) % len(groups)   # a consumer that has finished gives up its turns
    tensor = [(s, d) for lane, s, d, _, kind in bars if kind in ("qk", "pv")]
    end = max(s + d for s, d in tensor)
    lanes = ["producer"] + [f"consumer {c}" for c in range(consumers)] + ["tensor cores"]
    return {"bars": bars, "lanes": lanes, "end": end, "tensor_busy": sum(d for _, d in tensor) / end,
            "producer_wait": producer_wait, "consumer_wait": consumer_wait,
            "phases": [(i, *ring_slot_phase(i, stages)) for i in range(kv_tiles)],
            "params": {"stages": stages, "consumers": consumers, "kv_tiles": kv_tiles, "load": load, "mma": mma,
                       "softmax": softmax, "pingpong": pingpong}}
