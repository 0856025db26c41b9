"""Chapter 13 dashboards: the ring stepped, the overlap condition, and flash-decoding's splits.

Dashboards on the course's base (:class:`flashsim.course.kit.dashboard.Dashboard`), driven by ``update(...)``
without Jupyter (tests) or by their controls after ``show()``::

    r = RingStepper(world=4, causal=True); r.update(2)["step"]["sends"]    # which devices send at step 2
    OverlapDashboard().update(block=1024, link="pcie5")                   # the transfer does not hide
    DecodingDashboard().update(splits=16).time_s                           # modelled time on the H200

and the two sections that run real code: :func:`ring_on_processes` (ring attention on local processes with
``torch.distributed``) and :func:`split_kv_here` (the split-KV kernel against one pass). Without torch (and triton)
each says so in one line and shows what was recorded on H200s instead.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from flashsim import kernels            # the kernels load on first use (torch and triton): importing it is cheap
from flashsim.model.units import format_bytes
from flashsim.course import pick
from flashsim.course.ch13.figures import DecodingPlot, OverlapPlot, RingStepPlot
from flashsim.course.kit.dashboard import Dashboard, choice, int_range, slider, toggle
from flashsim.course.kit.optional import absent, missing
from flashsim.course.kit.real_gpu import measured_on
from flashsim.course.kit.results import load_result, result_source
from flashsim.measure import count_io
from flashsim.model.hardware import device_names
from flashsim.model.multi import closed_forms
from flashsim.model.multi.cluster import (LINK_PRESETS, flash_decoding, overlap_threshold, ring_attention,
                                          ring_step_times)
from flashsim.distributed.ring import RingRun, pick_backend, run_ring

__all__ = ["RingStepper", "OverlapDashboard", "DecodingDashboard", "h200_results", "ring_on_processes",
           "recorded_ring_runs", "split_kv_here", "recorded_summary"]


class RingStepper(Dashboard):
    """Step through ring attention on P simulated devices (:func:`flashsim.model.multi.cluster.ring_attention`).

    ``update(step)`` moves to step t; the state names what every device holds, computes and sends, and the link
    bytes so far. ``update(causal=flag)`` (or ``set_causal``) re-runs the ring with or without the causal mask.
    Controls: a Play button and slider over the steps, a causal checkbox.
    """

    plot = RingStepPlot
    layout = (("step",), ("causal",))
    figure_class = "flashsim-ring-plot"

    def __init__(self, world: int = 4, n: int | None = None, d: int = 64, heads: int = 1, dtype: str = "fp16",
                 causal: bool = False, device: str = "h200", link: str = "nvlink4", interval_ms: int = 900):
        self.world, self.d, self.heads, self.dtype, self.device, self.link = world, d, heads, dtype, device, link
        self.n = n or 1024 * world
        self.interval_ms = interval_ms
        self.step, self.causal = 0, bool(causal)
        self._run()
        self.update()

    def controls(self):
        return {"step": int_range("ring step", 0, self.n_steps - 1, play_ms=self.interval_ms, width="480px"),
                "causal": toggle("causal")}

    def _run(self) -> None:
        self.result = ring_attention(self.n, self.d, self.world, heads=self.heads, dtype=self.dtype,
                                     causal=self.causal, device=self.device, link=self.link)
        self.n_steps = len(self.result.steps)

    def set_causal(self, causal: bool) -> dict:
        return self.update(causal=bool(causal))

    def apply(self, step: int | None = None, causal: bool | None = None) -> dict:
        """Move to ring step `step` (clamped) and/or re-run with the mask `causal`; returns the state."""
        if causal is not None and bool(causal) != self.causal:
            self.causal = bool(causal)
            self._run()
        if step is not None:
            self.step = int(step)
        self.step = int(min(max(self.step, 0), self.n_steps - 1))
        s = self.result.steps[self.step]
        steps = [dict(held=x.held, work=x.work) for x in self.result.steps[:self.step + 1]]
        sending = [r for r in range(self.world) if s.sends[r]]
        title = (f"step {s.t} of 0–{self.n_steps - 1} ({'causal' if self.causal else 'non-causal'}): "
                 + (f"GPUs {sending} send" if sending else "no sends (last step)"))
        self.state = {"world": self.world, "step": dict(t=s.t, held=s.held, work=s.work, sends=s.sends,
                                                         link_bytes=s.link_bytes),
                      "steps_so_far": steps, "final_link_bytes": self.result.link_bytes, "title": title}
        return self.state

    def update(self, step: int | None = None, causal: bool | None = None) -> dict:
        if step is not None:                                 # clamped, as the Play button never goes past the end
            step = min(max(int(step), 0), self.n_steps - 1)
        return super().update(step=step, causal=causal)

    def readout(self) -> str:
        s = self.result.steps[self.step]
        msg = self.result.link_bytes and max(self.result.link_bytes) // max(1, max(self.result.link_messages))
        return (f"step {s.t}: each message is K_j and V_j of one shard = {msg:,} bytes; sent so far "
                f"{sum(s.link_bytes):,} of {self.result.total_link_bytes:,} bytes")

    def plot_args(self) -> dict:
        return {"state": self.state}


class OverlapDashboard(Dashboard):
    """One ring step's compute time vs transfer time as the block (rows per device) and the link change."""

    BLOCKS = tuple(2 ** k for k in range(7, 17))
    plot = OverlapPlot
    layout = (("block",), ("link", "device"))
    figure_class = "flashsim-overlap-plot"

    def __init__(self, block: int = 4096, link: str = "nvlink4", device: str = "h200", d: int = 128,
                 heads: int = 16, dtype: str = "fp16"):
        self.block, self.link, self.device, self.d, self.heads, self.dtype = block, link, device, d, heads, dtype
        self.update()

    def controls(self):
        return {"block": slider("block n", [(f"{b:,}", b) for b in sorted({*self.BLOCKS, self.block})],
                                width="480px"),
                "link": choice("link", sorted(LINK_PRESETS)), "device": choice("device", device_names())}

    def apply(self, block: int | None = None, link: str | None = None, device: str | None = None) -> dict:
        if block is not None:
            self.block = int(block)
        if link is not None:
            self.link = link
        if device is not None:
            self.device = device
        c, m = ring_step_times(self.block, self.d, self.heads, 1, self.dtype, self.device, self.link)
        self.state = {"compute_s": c, "comm_s": m, "hidden": c >= m,
                      "threshold": overlap_threshold(self.device, self.link, self.dtype)}
        return self.state

    def readout(self) -> str:
        s = self.state
        verdict = "the transfer hides behind the compute" if s["hidden"] else "the ring waits for the link"
        return (f"n = {self.block:,} rows per device on {self.device} over {self.link}: compute "
                f"{s['compute_s'] * 1e6:,.1f} µs, transfer {s['comm_s'] * 1e6:,.1f} µs per step: <b>{verdict}</b> "
                f"(threshold n ≥ {s['threshold']:,.0f})")

    def plot_args(self) -> dict:
        links = (self.link,) + tuple(x for x in ("nvlink4", "pcie5", "infiniband_ndr") if x != self.link)
        return {"device": self.device, "links": links, "d": self.d, "heads": self.heads, "dtype": self.dtype,
                "current": self.block}


class DecodingDashboard(Dashboard):
    """Flash-decoding on one simulated GPU: time and SM use as num_splits and the number of heads change."""

    SPLITS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
    HEADS = (1, 8, 16, 32)
    plot = DecodingPlot
    layout = (("splits",), ("heads",))
    figure_class = "flashsim-decoding-plot"

    def __init__(self, n: int = 65536, d: int = 128, heads: int = 16, splits: int = 1, device: str = "h200",
                 measured: dict | None = None):
        self.n, self.d, self.heads, self.splits, self.device = n, d, int(heads), int(splits), device
        self.measured = measured
        self.update()

    def controls(self):
        return {"splits": slider("num_splits", self.SPLITS, width="480px"),
                "heads": choice("heads", sorted({*self.HEADS, self.heads}))}

    def apply(self, splits: int | None = None, heads: int | None = None):
        if splits is not None:
            self.splits = int(splits)
        if heads is not None:
            self.heads = int(heads)
        self.current = flash_decoding(self.n, self.d, self.heads, splits=self.splits, device=self.device)
        self.base = flash_decoding(self.n, self.d, self.heads, splits=1, device=self.device)
        return self.current

    def readout(self) -> str:
        r = self.current
        return (f"{r.programs} programs for {r.device.num_sms} SMs ({r.waves} wave(s), "
                f"{r.sm_busy_fraction:.0%} of SMs busy): {r.time_s * 1e6:,.1f} µs modelled, "
                f"{self.base.time_s / r.time_s:.2f}× faster than no split; HBM bytes {format_bytes(r.hbm_bytes)}")

    def plot_args(self) -> dict:
        return {"n": self.n, "d": self.d, "heads": self.heads, "splits": self.SPLITS, "device": self.device,
                "measured": self.measured if self.heads == 16 else None, "current": self.splits}


def h200_results() -> dict:
    """The recorded H200 runs of chapter 13 (:mod:`flashsim.course.kit.results`): {"flash_decoding": the split-KV
    kernel timed over num_splits, "distributed": ring attention on 2 GPUs}, each with "file" (the raw record, for a
    maintainer) and "measured_on" ("measured on an NVIDIA H200, <date>", what a chapter prints)."""
    return {key: {**load_result(f"{key}_h200"), "file": Path(result_source(f"{key}_h200")).name,
                  "measured_on": measured_on(f"{key}_h200")}
            for key in ("flash_decoding", "distributed")}


def recorded_summary() -> list[str]:
    """Chapter 13's recorded GPU numbers as printable lines, each saying where and when it was measured: the ring
    on 2 GPUs over NCCL (bytes each GPU sent against the simulator's, the time of one pass) and flash-decoding (one
    pass vs split K/V, per number of heads)."""
    res = h200_results()
    dist, fd = res["distributed"], res["flash_decoding"]
    lines = [f"ring attention over NCCL, {dist['measured_on']}:"]
    for r in dist["runs"]:
        if r["comm_only"] or r["n"] != max(x["n"] for x in dist["runs"]):
            continue
        lines.append(f"  N={r['n']:,}, {r['heads']} heads, d={r['d']}, {r['dtype']}, "
                     f"{'causal    ' if r['causal'] else 'non-causal'}: sent per GPU {r['sent_bytes']} bytes "
                     f"(simulated {r['simulated_bytes']}), {max(r['seconds']) * 1e3:.1f} ms per pass")
    lines.append(f"flash-decoding, batch 1, N={fd['n']:,}, d={fd['d']}, {fd['measured_on']}:")
    for row in fd["rows"]:
        lines.append(f"  H={row['heads']:2d}: one pass {row['nosplit_s'] * 1e6:6.1f} µs "
                     f"({row['nosplit_gb_per_s']:.0f} GB/s), K/V split {row['split_s'] * 1e6:6.1f} µs: "
                     f"{row['speedup']:.2f}× faster")
    return lines


def recorded_ring_runs() -> list[RingRun]:
    """The ring recorded on 2 H200s over NCCL (:func:`h200_results`' "distributed"), as :class:`RingRun`\\ s: the
    passes whose output was checked against one device, at the largest N such a pass has, non-causal first (what
    :func:`ring_on_processes` returns)."""
    runs = [r for r in load_result("distributed_h200")["runs"] if not r["comm_only"] and r["max_abs_err"] is not None]
    largest = max(r["n"] for r in runs)
    fields = [f.name for f in dataclasses.fields(RingRun)]
    return [RingRun(**{k: r[k] for k in fields}) for r in sorted(runs, key=lambda r: r["causal"])
            if r["n"] == largest]


def ring_on_processes(world: int = 2, heads: int | None = None, n: int | None = None, d: int = 64,
                      dtype: str = "fp16") -> list[RingRun]:
    """Ring attention on `world` local processes (:func:`flashsim.distributed.ring.run_ring`), non-causal and
    causal: NCCL with the course's Triton kernel when there is a GPU per process, else gloo on this CPU. Prints the
    backend in one line. Without torch: one line says so, and :func:`recorded_ring_runs` are returned."""
    if absent("torch"):
        print(f"{missing('kernels')} Shown instead: the ring over NCCL, {measured_on('distributed_h200')}.")
        return recorded_ring_runs()
    backend = pick_backend()
    gpus = 0
    if backend == "nccl":
        import torch                                  # lazy: torch is an optional extra
        gpus = torch.cuda.device_count()
    backend = backend if gpus >= world else "gloo"
    print(f"backend: {backend} ({world} processes{f' on {world} GPUs' if backend == 'nccl' else ' on this CPU'})")
    return run_ring(world=world, heads=heads or pick(small=2, full=8), n=n or pick(small=256, full=2048), d=d,
                    dtype=dtype, causal=(False, True), backend=backend, use_triton=backend == "nccl")


def split_kv_here(n_kv: int | None = None, d: int = 64, heads: int = 4, splits=(1, 8)) -> dict:
    """The split-KV kernel (:func:`flashsim.kernels.split_kv_attention`) against one-pass attention, fp16, one query
    row: its max error per number of splits, and in the interpreter its loads and stores counted next to the
    closed form (8 splits). Prints one line each; returns {"errors": {splits: max error}, "measured_bytes",
    "closed_form_bytes", "recorded": None}. Without torch and triton: one line says so, then the errors recorded
    on the H200 (:func:`h200_results`' "flash_decoding"), returned as "recorded" (its rows)."""
    why = missing("kernels")
    if why:
        fd = load_result("flash_decoding_h200")
        print(f"{why} Shown instead: the split-KV kernel at N={fd['n']:,}, d={fd['d']}, "
              f"{measured_on('flash_decoding_h200')}.")
        for row in fd["rows"]:
            print(f"H={row['heads']:2d}: max error against the reference: one pass {row['nosplit_err']:.1e}, "
                  f"{row['splits']} splits {row['split_err']:.1e}")
        return {"errors": {}, "measured_bytes": None, "closed_form_bytes": None, "recorded": fd["rows"]}
    import torch                                      # lazy: torch is an optional extra
    interp = kernels.INTERPRETER
    dev = "cpu" if interp else "cuda"
    n_kv = int(n_kv or pick(small=512, full=4096 if interp else 65536))   # the interpreter is slow
    g = torch.Generator().manual_seed(0)
    qd, kd, vd = (torch.randn(1, heads, m, d, generator=g).half().to(dev) for m in (1, n_kv, n_kv))  # (1, H, m, d)
    ref = torch.softmax(qd.float() @ kd.float().transpose(-1, -2) * d ** -0.5, -1) @ vd.float()    # (1, H, 1, d)
    out = {"errors": {}, "measured_bytes": None, "closed_form_bytes": None, "recorded": None}
    for s in splits:
        o_s, _ = kernels.split_kv_attention(qd, kd, vd, num_splits=s)
        out["errors"][s] = float((o_s.float() - ref).abs().max())
        print(f"num_splits={s}: max |split-KV − one pass| = {out['errors'][s]:.1e}")
    if interp:
        io = count_io(kernels.split_kv_attention, qd, kd, vd, num_splits=8)
        chunks = flash_decoding(n_kv, d, heads=heads, splits=8, block_n=32).splits
        out["measured_bytes"] = int(io.load_bytes + io.store_bytes)
        out["closed_form_bytes"] = int(closed_forms.split_kv_total_bytes(n_kv, d, chunks, heads=heads))
        print(f"interpreter: measured {out['measured_bytes']:,} bytes, closed form {out['closed_form_bytes']:,}")
    return out
