"""Chapter 14 dashboards: a warp-specialized CTA's pipeline and a persistent grid's schedule to move on a CPU, the
recorded forward speeds, and the same comparison on this machine's GPU.

- :class:`PipelineDashboard`: the timeline of :func:`flashsim.course.ch14.ring.pipeline_timeline` (ring depth,
  consumers, ping-pong, copy and softmax times);
- :class:`ScheduleDashboard`: a causal grid's tiles dealt to P persistent CTAs (:mod:`flashsim.course.ch14.schedule`)
  by a fixed stride, greedily, or longest first, and the makespan;
- :class:`GluonSpeedDashboard`: the recorded forward speeds against N (:mod:`flashsim.course.ch14.runs`);
- :func:`measure_here`: the four forward kernels timed on this machine's Hopper GPU.

The recorded runs are read in :mod:`.runs`, the tables built in :mod:`.tables` (the Gluon kernels' predicted
against measured bytes in :mod:`.measured_io`); the names the notebook uses from them are re-exported here, so
that ``flashsim.widgets`` has them.
"""
from __future__ import annotations

from flashsim.course.ch14.fa4 import fa4_comparison, fa4_summary_text
from flashsim.course.ch14.figures import GluonSpeedPlot, PipelinePlot, SchedulePlot
from flashsim.course.ch14.measured_io import measured_io, measured_io_table
from flashsim.course.ch14.ring import pipeline_timeline
from flashsim.course.ch14.runs import (DTYPES, GLUON_KERNEL_LABELS, GLUON_KERNELS, gluon_rows, load_gluon,
                                       speed_ratio, tuning_summary)
from flashsim.course.ch14.schedule import RULES, deal, tile_costs
from flashsim.course.ch14.tables import (gluon_headline, gluon_headline_text, gluon_io, gluon_io_table,
                                         ring_protocol_table, span, speed_vs_cudnn)
from flashsim.course.kit.dashboard import Dashboard, choice, slider, toggle
from flashsim.course.kit.optional import missing
from flashsim.course.kit.results import measured_on_label
from flashsim.errors import FlashsimError
from flashsim.model.attention.reference import reference_attention

__all__ = ["PipelineDashboard", "ScheduleDashboard", "GluonSpeedDashboard", "measure_here",
           # re-exported from .runs, .tables, .schedule, .measured_io and .fa4 for flashsim.widgets
           "GLUON_KERNELS", "GLUON_KERNEL_LABELS", "load_gluon", "gluon_rows", "tuning_summary", "speed_vs_cudnn",
           "gluon_headline", "gluon_headline_text", "ring_protocol_table", "gluon_io", "gluon_io_table",
           "tile_costs", "measured_io", "measured_io_table", "fa4_comparison", "fa4_summary_text"]


class PipelineDashboard(Dashboard):
    """One CTA of a warp-specialized forward, simulated (chapter 14): a producer filling a ring of `stages` K/V
    slots, `consumers` warpgroups of 64 query rows, the tensor cores they share. ``update(stages=..., consumers=...,
    pingpong=..., load=..., softmax=...)``; ``state`` holds the timeline (:func:`.ring.pipeline_timeline`)."""

    STAGES = (1, 2, 3, 4)
    CONSUMERS = (1, 2, 3)
    TIMES = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0)
    plot = PipelinePlot
    layout = (("stages", "consumers", "pingpong"), ("load", "softmax"))

    def __init__(self, stages: int = 2, consumers: int = 2, pingpong: bool = False, load: float = 1.0,
                 softmax: float = 1.5, kv_tiles: int = 6):
        self.stages, self.consumers, self.pingpong = int(stages), int(consumers), bool(pingpong)
        self.load, self.softmax, self.kv_tiles = float(load), float(softmax), int(kv_tiles)
        self.update()

    def controls(self):
        return {"stages": slider("ring slots", self.STAGES), "consumers": slider("consumer warpgroups", self.CONSUMERS),
                "pingpong": toggle("ping-pong"),
                "load": slider("copy time per K/V tile", sorted({*self.TIMES, self.load})),
                "softmax": slider("softmax time per tile", sorted({*self.TIMES, self.softmax}))}

    def apply(self, stages=None, consumers=None, pingpong=None, load=None, softmax=None) -> dict:
        self.stages = self.stages if stages is None else int(stages)
        self.consumers = self.consumers if consumers is None else int(consumers)
        self.pingpong = self.pingpong if pingpong is None else bool(pingpong)
        self.load = self.load if load is None else float(load)
        self.softmax = self.softmax if softmax is None else float(softmax)
        self.state = pipeline_timeline(self.stages, self.consumers, self.kv_tiles, load=self.load,
                                       softmax=self.softmax, pingpong=self.pingpong)
        return self.state

    def readout(self) -> str:
        s = self.state
        return (f"{self.consumers} × 64 query rows over {self.kv_tiles} K/V tiles: done at {s['end']:g}, "
                f"<b>{s['end'] / self.consumers:.2f} per 64 rows</b>; tensor cores busy {s['tensor_busy']:.0%}; "
                f"the producer waited {s['producer_wait']:g} for a free slot, the consumers "
                f"{s['consumer_wait']:g} for a full slot or their turn")

    def plot_args(self) -> dict:
        return {"timeline": self.state}


class ScheduleDashboard(Dashboard):
    """A (heads × query blocks) grid of tiles dealt to `ctas` persistent CTAs (chapter 14), causal or not, its
    tiles longest first or shortest first, by one of :data:`.schedule.RULES`. ``update(ctas=..., rule=...,
    order=..., causal=...)``; ``state`` holds the deal (:func:`.schedule.deal`)."""

    CTAS = tuple(range(2, 17))
    ORDERS = ("longest first", "shortest first")
    plot = SchedulePlot
    layout = (("ctas",), ("rule", "order", "causal"))

    def __init__(self, query_blocks: int = 16, heads: int = 2, ctas: int = 6, rule: str = "stride",
                 order: str = "shortest first", causal: bool = True):
        self.query_blocks, self.heads = int(query_blocks), int(heads)
        self.ctas, self.rule, self.order, self.causal = int(ctas), rule, order, bool(causal)
        self.update()

    def controls(self):
        return {"ctas": slider("CTAs (SMs)", self.CTAS), "rule": choice("deal", list(RULES)),
                "order": choice("tile list", self.ORDERS), "causal": toggle("causal")}

    def apply(self, ctas=None, rule=None, order=None, causal=None) -> dict:
        self.ctas = self.ctas if ctas is None else int(ctas)
        self.rule = self.rule if rule is None else rule
        self.order = self.order if order is None else order
        self.causal = self.causal if causal is None else bool(causal)
        self.costs = tile_costs(self.query_blocks, self.heads, self.causal,
                                longest_first=self.order == "longest first")
        self.state = deal(self.costs, self.ctas, self.rule)
        return self.state

    def readout(self) -> str:
        s = self.state
        idle = 1 - sum(s["loads"]) / (self.ctas * s["makespan"])
        return (f"{len(self.costs)} tiles on {self.ctas} CTAs, {RULES[self.rule]}: <b>makespan {s['makespan']:g}</b> "
                f"(no schedule finishes before {s['bound']:.3g}); the CTAs sit idle {idle:.0%} of that time")

    def plot_args(self) -> dict:
        return {"costs": self.costs, "dealt": self.state,
                "title": f"{self.heads} heads × {self.query_blocks} query blocks"
                         f"{', causal' if self.causal else ''}, {self.order}, dealt by {self.rule!r}"}


class GluonSpeedDashboard(Dashboard):
    """The recorded forward speeds against N for one dtype, head dim and mask (chapter 14): cuDNN and
    FlashAttention-2 (SDPA's backends), the course's Triton and Gluon kernels. ``update(dtype=..., d=...,
    causal=...)``; ``current`` holds the rows shown."""

    plot = GluonSpeedPlot
    layout = (("dtype", "d", "causal"),)

    def __init__(self, dtype: str = "fp16", d: int = 128, causal: bool = False, results=None):
        self.results = load_gluon() if results is None else results
        if not self.results or not self.results["rows"]:
            raise FlashsimError("no Gluon run to show: load_gluon() found no rows")
        self.dtypes = sorted({r["dtype"] for r in self.results["rows"]})
        self.ds = sorted({r["d"] for r in self.results["rows"]})
        self.dtype, self.d, self.causal = dtype, int(d), bool(causal)
        self.current: list = []
        self.update()

    def controls(self):
        return {"dtype": choice("dtype", self.dtypes), "d": choice("head dim d", self.ds), "causal": toggle("causal")}

    def apply(self, dtype: str | None = None, d: int | None = None, causal: bool | None = None) -> list:
        dtype = self.dtype if dtype is None else DTYPES.get(dtype, dtype)
        d = self.d if d is None else int(d)
        if dtype not in self.dtypes:
            raise FlashsimError(f"dtype={dtype!r}: the run has {self.dtypes}")
        if d not in self.ds:
            raise FlashsimError(f"d={d}: the run has head dims {self.ds}")
        self.dtype, self.d = dtype, d
        self.causal = self.causal if causal is None else bool(causal)
        self.current = sorted(gluon_rows(self.results, self.dtype, self.d, self.causal), key=lambda r: r["n"])
        return self.current

    def readout(self) -> str:
        rows = self.current
        if not rows:
            return "no rows for this choice"
        g_cudnn = [speed_ratio(r, "gluon", "cudnn") for r in rows]
        cfg = self.results["configs"].get((self.d, self.causal), {})
        return (f"{self.dtype}, d={self.d}, {'causal' if self.causal else 'non-causal'}: Gluon / cuDNN "
                f"{span(g_cudnn)} ({sum(x >= 1.0 for x in g_cudnn)}/{len(rows)} rows at least as fast), Gluon / "
                f"FlashAttention-2 {span([speed_ratio(r, 'gluon', 'flash') for r in rows])}, Gluon / Triton "
                f"{span([speed_ratio(r, 'gluon', 'triton') for r in rows])}; configuration: {cfg.get('NC', '?')} "
                f"consumers × 64 rows, {cfg.get('STAGES', '?')} K/V slots")

    def plot_args(self) -> dict:
        rows = self.current
        series = {GLUON_KERNEL_LABELS[k]: [r["tflops"][k] for r in rows] for k in GLUON_KERNELS}
        return {"ns": [r["n"] for r in rows], "series": series,
                "title": f"{measured_on_label(self.results)}: forward, {self.dtype}, d={self.d}, "
                         f"{'causal' if self.causal else 'non-causal'}, B·N = {rows[0]['batch'] * rows[0]['n']:,}"
                         if rows else "no rows"}


def measure_here(n: int = 4096, d: int = 128, causal: bool = False, dtype: str = "fp16", batch: int | None = None,
                 heads: int | None = None) -> dict | None:
    """Time the Gluon forward on this machine's GPU next to the course's Triton forward and SDPA's FlashAttention-2
    and cuDNN backends (chapter 14), each checked against a float64 reference first. None, having printed why in one
    line, where that cannot run: no torch/triton, no CUDA GPU, or no Hopper GPU with Triton's Gluon.

    Returns {"device", "size": {...}, "ms": {kernel: ms}, "tflops": {kernel: TFLOP/s}, "err": {kernel: max abs
    error}} over the kernels that ran (SDPA backends this PyTorch lacks are left out)."""
    why = missing("kernels")
    if why:
        print(why)
        return None
    from flashsim.kernels import gluon as gluon_kernels       # guarded: imports nothing heavy
    ok, why = gluon_kernels.available()
    if not ok:
        print(f"the Gluon forward does not run here: {why}")
        return None
    import inspect

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from flashsim.kernels import flash_forward
    from flashsim.measure import bench

    batch = batch or max(1, 16384 // n)
    heads = heads or 2048 // d
    torch_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    g = torch.Generator(device="cuda").manual_seed(14)
    q, k, v = (torch.randn(batch, heads, n, d, device="cuda", dtype=torch_dtype, generator=g) for _ in range(3))
    triton_kw = {"gluon": False} if "gluon" in inspect.signature(flash_forward).parameters else {}
    runs = {"triton": lambda: flash_forward(q, k, v, causal=causal, **triton_kw)[0],
            "gluon": lambda: gluon_kernels.gluon_forward(q, k, v, causal=causal)[0]}
    for name, be in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", getattr(SDPBackend, "CUDNN_ATTENTION", None))):
        if be is not None:
            runs[name] = (lambda be=be: _sdpa(F, sdpa_kernel, be, q, k, v, causal))
    ref = _reference(q[:1, :2], k[:1, :2], v[:1, :2], causal)            # float64, on a slice
    flops = 4 * batch * heads * n * n * d * (0.5 if causal else 1.0)
    out = {"device": torch.cuda.get_device_name(), "size": {"batch": batch, "heads": heads, "n": n, "d": d,
                                                            "dtype": dtype, "causal": causal},
           "ms": {}, "tflops": {}, "err": {}}
    for name in GLUON_KERNELS:
        if name not in runs:
            continue
        try:
            o = runs[name]()
        except RuntimeError as e:                         # e.g. an SDPA backend that refuses these inputs
            print(f"{GLUON_KERNEL_LABELS[name]}: did not run ({str(e).splitlines()[0][:120]})")
            continue
        out["err"][name] = float((o[:1, :2].double() - ref).abs().max())
        out["ms"][name] = bench(runs[name])
        out["tflops"][name] = flops / (out["ms"][name] * 1e-3) / 1e12
    return out


def _sdpa(F, sdpa_kernel, backend, q, k, v, causal):
    with sdpa_kernel(backend):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def _reference(q, k, v, causal):
    import torch
    o = reference_attention(q.double().cpu().numpy(), k.double().cpu().numpy(), v.double().cpu().numpy(),
                            causal=causal)
    return torch.from_numpy(o).to(q.device)
