"""Chapter 14's tables and the numbers its text quotes, built from the recorded runs (:mod:`.runs`) and the model.

- :func:`speed_vs_cudnn`: every row of the recorded forward run as speed relative to cuDNN (the one figure of
  measured numbers, :func:`flashsim.course.ch14.figures.plot_speed_vs_cudnn`);
- :func:`gluon_headline` / :func:`gluon_headline_text`: the counts the chapter quotes, written from the data;
- :func:`ring_protocol_table`: the ring's mbarriers, who waits on each and who completes it;
- :func:`gluon_io` / :func:`gluon_io_table`: the kernel view of the warp-specialized forward's copies, next to
  the Triton forward's.
"""
from __future__ import annotations

from flashsim.course.ch14.runs import (GLUON_KERNEL_LABELS, GLUON_KERNELS, GLUON_ROWS_PER_CONSUMER, GLUON_TARGETS,
                                       gluon_rows, load_gluon, load_gluon_backward, recorded_on, speed_ratio,
                                       time_ratios, tuned_configs)
from flashsim.errors import FlashsimError
from flashsim.model.attention.visibility import n_blocks, visible_col_blocks
from flashsim.model.kernel_io import kernel_io
from flashsim.model.table import Table

__all__ = ["span", "speed_vs_cudnn", "gluon_headline", "gluon_headline_text", "ring_protocol_table", "gluon_io",
           "gluon_io_table"]


def span(values, digits: int = 2) -> str:
    """"lo–hi" of some numbers ("—" for none)."""
    values = [v for v in values if v is not None]
    if not values:
        return "—"
    lo, hi = min(values), max(values)
    return f"{lo:.{digits}f}" if round(lo, digits) == round(hi, digits) else f"{lo:.{digits}f}–{hi:.{digits}f}"


def speed_vs_cudnn(results=None) -> dict:
    """The recorded forward run as speed relative to cuDNN (chapter 14's figure): one group per (head dim, mask),
    its rows ordered by dtype and N. Returns {"label" (GPU and date, from the run's metadata), "groups": [{"d",
    "causal", "rows": [{"dtype", "n", "ratio": {kernel: speed / cuDNN's speed (median over the rounds)}, "range":
    {kernel: (lo, hi) over the rounds}}]}]}; {} when there is no run."""
    results = load_gluon() if results is None else results
    if not results or not results["rows"]:
        return {}
    others = [k for k in GLUON_KERNELS if k != "cudnn"]
    groups = []
    for d, causal in sorted({(r["d"], r["causal"]) for r in results["rows"]}):
        rows = sorted(gluon_rows(results, d=d, causal=causal), key=lambda r: (r["dtype"], r["n"]))
        groups.append({"d": d, "causal": causal, "rows": [
            {"dtype": r["dtype"], "n": r["n"], "ratio": {k: speed_ratio(r, k, "cudnn") for k in others},
             "range": {k: (min(p), max(p)) for k in others if (p := time_ratios(r, "cudnn", k))}}
            for r in rows]})
    return {"label": recorded_on(results), "kernels": {k: GLUON_KERNEL_LABELS[k] for k in others},
            "groups": groups}


def _counts(rows: list, a: str, b: str, target: float) -> dict:
    """Over `rows` that timed both: how many, how many with speed a / speed b >= target (median over rounds), in
    every round and in none, and the median's range."""
    rows = [r for r in rows if time_ratios(r, b, a)]
    med = [speed_ratio(r, a, b) for r in rows]
    per = [time_ratios(r, b, a) for r in rows]                           # speed a / speed b, per round
    return {"rows": len(rows), "met": sum(x >= target for x in med),
            "every_round": sum(min(p) >= target for p in per), "no_round": sum(max(p) < target for p in per),
            "min": min(med) if med else None, "max": max(med) if med else None}


def gluon_headline(results=None, backward=None) -> dict:
    """The counts the chapter's text gives, from the Gluon run (`results`, default :func:`load_gluon`) and its
    backward (`backward`, default :func:`load_gluon_backward`): {"forward": {"vs_cudnn", "vs_triton", "vs_flash",
    "triton_vs_cudnn", "triton_vs_flash"}, "backward": {"vs_cudnn", "vs_triton", "vs_flash"}, "targets", "rounds"};
    each entry {"rows", "met" (rows at the target: the forward's 1.0x and backward's 0.9x against cuDNN, 1.0x
    against the others), "every_round", "no_round", "min", "max"} (:func:`_counts`). {} when there is nothing."""
    results = load_gluon() if results is None else results
    backward = load_gluon_backward() if backward is None else backward
    if not results or not results["rows"]:
        return {}
    fwd, bwd = results["rows"], (backward or {}).get("rows") or []
    tf, tb = GLUON_TARGETS["forward"], GLUON_TARGETS["backward"]
    return {"targets": dict(GLUON_TARGETS), "rounds": results.get("rounds"),
            "forward": {"vs_cudnn": _counts(fwd, "gluon", "cudnn", tf),
                        "vs_triton": _counts(fwd, "gluon", "triton", 1), "vs_flash": _counts(fwd, "gluon", "flash", 1),
                        "triton_vs_cudnn": _counts(fwd, "triton", "cudnn", 1),
                        "triton_vs_flash": _counts(fwd, "triton", "flash", 1)},
            "backward": {"vs_cudnn": _counts(bwd, "gluon", "cudnn", tb),
                         "vs_triton": _counts(bwd, "gluon", "triton", 1),
                         "vs_flash": _counts(bwd, "gluon", "flash", 1)}}


def _x(v) -> str:
    return f"{v:.2f}×"


def gluon_headline_text(part: str = "forward", headline=None) -> str:
    """The chapter's sentences with numbers in them, written from :func:`gluon_headline` so that they say what the
    recorded run says (chapter 14): ``part`` "forward" or "backward"."""
    h = gluon_headline() if headline is None else headline
    if not h:
        return "no Gluon run to summarise"
    f, b = h["forward"], h["backward"]
    g, t = f["vs_cudnn"], f["triton_vs_cudnn"]
    rounds = (f" (median of {h['rounds']} interleaved rounds; in every round in {g['every_round']} of them, in no "
              f"round in {g['no_round']})" if h.get("rounds") else "")
    if part == "forward":
        return (f"Triton against cuDNN: at least as fast in {t['met']} of the {t['rows']} rows, "
                f"{_x(t['min'])}–{_x(t['max'])}; against FlashAttention-2 {_x(f['triton_vs_flash']['min'])} or "
                f"more in every row.\n"
                f"Gluon against cuDNN: at least as fast in {g['met']} of the {g['rows']} rows{rounds}, "
                f"{_x(g['min'])}–{_x(g['max'])}, so within {1 - g['min']:.0%} in every row; against "
                f"FlashAttention-2 {_x(f['vs_flash']['min'])} or more; faster than the Triton kernel in "
                f"{f['vs_triton']['met']} of {f['vs_triton']['rows']} rows ({_x(f['vs_triton']['min'])}–"
                f"{_x(f['vs_triton']['max'])}).")
    if part == "backward":
        c, tr = b["vs_cudnn"], b["vs_triton"]
        if not c["rows"]:
            return "no backward rows in this run"
        return (f"Gluon backward against cuDNN's: {_x(c['min'])}–{_x(c['max'])}, at least "
                f"{h['targets']['backward']}× (the target) in {c['met']} of the {c['rows']} rows; against "
                f"FlashAttention-2's {_x(b['vs_flash']['min'])} or more; against the course's Triton backward "
                f"{_x(tr['min'])}–{_x(tr['max'])} in the {tr['rows']} rows where both were timed.")
    raise FlashsimError(f"part={part!r}: 'forward' or 'backward'")



def ring_protocol_table(stages: int = 2, consumers: int = 2):
    """The mbarriers of the Gluon forward's shared-memory ring (chapter 14): who waits on each and who completes
    it. ``ready`` barriers complete when TMA has written the slot's bytes; ``empty`` ones when every consumer has
    arrived."""
    if stages < 1 or consumers < 1:
        raise FlashsimError(f"stages={stages}, consumers={consumers}: both must be at least 1")
    rows = [
        ["q_ready[c, b]", 2 * consumers, "consumer c", "TMA, when the Q box's bytes have landed (expect-tx)"],
        ["q_empty[c, b]", 2 * consumers, "the producer", "consumer c, after its last QKᵀ of that tile"],
        ["k_ready[s]", stages, "every consumer", "TMA, when K_j's box has landed"],
        ["k_empty[s]", stages, "the producer", f"all {consumers} consumers (count {consumers}), after S_j"],
        ["v_ready[s]", stages, "every consumer", "TMA, when V_j's box has landed"],
        ["v_empty[s]", stages, "the producer", f"all {consumers} consumers (count {consumers}), after P_j V_j"],
        ["turn[c]", consumers, "consumer c (ping-pong on)", "the consumer before c, after issuing its wgmma"],
    ]
    return Table(["mbarrier", "how many", "who waits", "who completes it"], rows,
                 f"The ring's mbarriers: {stages} K/V slots, {consumers} consumer warpgroups, b = Q buffer 0/1; a "
                 "waiter checks the barrier's phase bit (it flips each time the barrier completes)")


def gluon_io(n: int, d: int, causal: bool = False, batch: int = 1, heads: int = 1, dtype: str = "fp16",
             consumers: int | None = None, block_n: int | None = None, ctas: int = 132,
             triton_blocks: tuple | None = None) -> dict:
    """The kernel view (:func:`flashsim.model.kernel_io.kernel_io`) of the Gluon forward's global-memory traffic
    (chapter 14), next to the Triton forward's.

    The Gluon kernel is an FA2 forward with a query tile of ``consumers × 64`` rows and K/V tiles of ``block_n``
    (default: the recorded configuration for d and causal): each K/V tile is copied once per query tile and shared
    by the consumers, so the kernel view is ``kernel_io("flash_fwd", ...)`` with those blocks. Two things the
    kernel view does not count, given separately: TMA copies whole boxes, so a query tile or K/V tile that runs past
    N still copies its full box ("box_bytes": rows past N come from the next head, or TMA's zero fill at the end of
    the tensor); and each CTA copies one Q tile and K_0 after its last tile, whose scores it drops
    ("prefetch_bytes", for ``min(ctas, tiles)`` CTAs). ``triton_blocks`` (BLOCK_M, BLOCK_N): the Triton kernel's
    (default: its tuned H200 forward blocks, or none without torch/triton).

    Returns {"gluon": {"loads", "stores"}, "triton": ... or None, "triton_blocks", "block_m", "block_n", "box_bytes":
    {"Q", "K", "V"}, "prefetch_bytes", "kv_reads" (K bytes / (B·H·N·d·b): how many times K and V are read),
    "floor": {"loads", "stores"} (every byte once: what the DRAM sees if the L2 holds each head's K and V while its
    query tiles run)}.
    """
    if (d, bool(causal)) not in _recorded_configs() and (consumers is None or block_n is None):
        raise FlashsimError(f"d={d}: the Gluon forward covers d in (64, 128); or pass consumers= and block_n=")
    cfg = _recorded_configs().get((d, bool(causal)), {})
    nc = int(consumers or cfg["NC"])
    bn = int(block_n or cfg["BLOCK_N"])
    bm = nc * GLUON_ROWS_PER_CONSUMER
    es = {"fp16": 2, "bf16": 2}.get(dtype)
    if es is None:
        raise FlashsimError(f"dtype={dtype!r}: the Gluon forward takes fp16 or bf16")
    bh = batch * heads

    def view(block_m, block_n_):
        (launch,) = kernel_io("flash_fwd", n, d, block_m, block_n_, causal=causal, dtype=dtype, batch=batch,
                              heads=heads).per_tensor().values()
        return launch

    gluon = view(bm, bn)
    if triton_blocks is None:
        tuned = tuned_configs().get(("fwd", d, bool(causal)))
        triton_blocks = tuned[:2] if tuned else None
    triton = view(*triton_blocks) if triton_blocks else None
    tiles = n_blocks(n, bm)
    kv_box_rows = sum(int(visible_col_blocks(i, bm, bn, n, causal)) * bn for i in range(tiles))
    box = {"Q": bh * tiles * bm * d * es, "K": bh * kv_box_rows * d * es, "V": bh * kv_box_rows * d * es}
    prefetch = min(ctas, bh * tiles) * (bm + bn) * d * es
    return {"gluon": gluon, "triton": triton, "triton_blocks": triton_blocks, "block_m": bm, "block_n": bn,
            "box_bytes": box, "prefetch_bytes": prefetch, "kv_reads": gluon["loads"]["K"] / (bh * n * d * es),
            "floor": view(n, bn)}


def _recorded_configs() -> dict:
    results = load_gluon()
    return results["configs"] if results else {}


def gluon_io_table(n: int, d: int, causal: bool = False, batch: int = 1, heads: int = 1, dtype: str = "fp16"):
    """:func:`gluon_io` as a :class:`flashsim.course.Table` of MB per tensor (chapter 14)."""
    io = gluon_io(n, d, causal, batch, heads, dtype)
    mb = 1e6
    rows = []
    for kind, tensors in (("loads", ("Q", "K", "V")), ("stores", ("O", "LSE"))):
        for t in tensors:
            tri = io["triton"][kind].get(t) if io["triton"] else None
            rows.append([f"{t} ({kind[:-1]})", None if tri is None else round(tri / mb, 1),
                         round(io["gluon"][kind][t] / mb, 1),
                         round(io["box_bytes"][t] / mb, 1) if t in io["box_bytes"] else "masked stores",
                         round(io["floor"][kind][t] / mb, 1)])
    rows.append(["Q + K_0 copied after the last tile", None, None, round(io["prefetch_bytes"] / mb, 1), None])
    tb = io["triton_blocks"]
    return Table(["tensor", f"Triton kernel view{f' ({tb[0]}×{tb[1]})' if tb else ''}",
                  f"Gluon kernel view ({io['block_m']}×{io['block_n']})", "Gluon TMA boxes", "every byte once"],
                 rows, f"Predicted MB, forward, B={batch}, H={heads}, N={n:,}, d={d}, {dtype}"
                       f"{', causal' if causal else ''}: K and V are read {io['kv_reads']:.1f} times by the Gluon "
                       f"kernel (once per {io['block_m']}-row query tile)")
