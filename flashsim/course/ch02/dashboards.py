"""Chapter 02 dashboards: Algorithm 0 stepped event by event, traffic vs N, and the eager framework's op bytes.

    s = Algorithm0Stepper(n=8, d=4, block=4); s.update(step=10); s.state["read_by_tensor"]
    t = TrafficVsN(); t.update(d=128); t.current["naive"].hbm_bytes
    e = EagerOpsDashboard(); e.update(preset="megatron2020"); e.rows      # [(op, read, write), ...]
"""
from __future__ import annotations

from flashsim.errors import FlashsimError
from flashsim.course.ch00.dashboards import widget_or_figure

__all__ = ["EventStepper", "Algorithm0Stepper", "TrafficVsN", "EagerOpsDashboard", "eager_op_bytes", "EAGER_CHOICES"]

_OP_LABELS = {"scale": "S·scale", "mask": "mask", "dropout": "dropout"}


def _op_label(op) -> str:
    if op.kind == "gemm_nn":
        return "S = QKᵀ" + ("·scale" if op.scale else "")
    if op.kind == "gemm_nd":
        return "O = PV"
    if op.kind == "softmax":
        return ("mask+softmax" if op.mask else "softmax") + (" (fp32)" if op.out.endswith("fp32") else "")
    if op.fn == "cast":
        return "cast → fp32" if op.out.endswith("fp32") else "cast → fp16"
    return _OP_LABELS.get(op.fn, op.fn or op.kind)


#: the eager configurations the dashboard offers: label -> (algo, eager_ops)
EAGER_CHOICES = {"Algorithm 0 (3 kernels)": ("naive", None),
                 "Megatron-LM 2020 (FA1 Fig. 2 baseline)": ("eager", "megatron2020"),
                 "PyTorch eager, op by op": ("eager", "pytorch")}


def eager_op_bytes(n: int, d: int, dtype: str = "fp16", algo: str = "eager", eager_ops="pytorch",
                   causal: bool = False, dropout_p: float = 0.0) -> list[tuple[str, int, int]]:
    """[(op label, HBM bytes read, HBM bytes written)] for each forward kernel of standard attention, one head.

    The bytes come from :func:`flashsim.traffic` (per tensor); in the forward pass each tensor is read by exactly
    one op, so an op's bytes are the reads of its inputs plus the writes of its outputs (chapter 02).
    """
    from flashsim.model.attention.standard import NAIVE_OPS, build_program, resolve_eager_ops
    from flashsim.model.simulator import traffic

    ops = NAIVE_OPS if algo == "naive" else resolve_eager_ops(eager_ops)
    t = traffic(algo, n, d, dtype=dtype, causal=causal, dropout_p=dropout_p,
                **({} if algo == "naive" else {"eager_ops": eager_ops}))
    prog = build_program(ops, dtype, causal, dropout_p > 0, False)
    rows = []
    for op in prog.forward:
        read = sum(t.read_bytes_by_tensor.get(name, 0) for name in op.ins)
        write = t.write_bytes_by_tensor.get(op.out, 0) + (t.write_bytes_by_tensor.get(op.extra_out, 0)
                                                         if op.extra_out else 0)
        rows.append((_op_label(op), int(read), int(write)))
    if sum(r + w for _, r, w in rows) != t.hbm_bytes:
        raise FlashsimError("eager_op_bytes: per-op bytes do not add up to traffic().hbm_bytes")  # pragma: no cover
    return rows


class EventStepper:
    """Replay an event log of the simulated memory one load / compute / store at a time (chapter 02; chapter 03's
    tiled QKᵀ reuses it).

    ``update(step=i)`` moves to step i; ``state`` says which tile each tensor has in play, which tiles were read
    and written so far, and the HBM bytes read and written per tensor up to and including step i. Subclasses set
    ``events`` (load, compute and store events; "free" events only release SRAM), ``tensors``, ``square``
    (the N×N tensors) and ``phase(event)``.
    """

    tensors: tuple = ()
    square: tuple = ()

    def _init_events(self, events, n: int, d: int, block: int) -> None:
        self.n, self.d, self.block = n, d, block
        self.events = [e for e in events if e.kind in ("load", "compute", "store")]
        self.n_steps = len(self.events)
        self.step = 0
        self.state: dict = {}
        self.update(step=0)

    def phase(self, event) -> str:
        return ""

    def update(self, step: int | None = None) -> dict:
        if step is not None:
            step = int(step)
            if not 0 <= step < self.n_steps:
                raise FlashsimError(f"step={step}: this run has steps 0..{self.n_steps - 1}")
            self.step = step
        reads, writes, written, read = {}, {}, set(), set()
        for e in self.events[: self.step + 1]:
            if e.kind == "load":
                reads[e.tensor] = reads.get(e.tensor, 0) + e.nbytes
                read.add((e.tensor, e.tile))
            elif e.kind == "store":
                writes[e.tensor] = writes.get(e.tensor, 0) + e.nbytes
                written.add((e.tensor, e.tile))
        ev = self.events[self.step]
        self.state = {"event": ev, "step": self.step, "n_steps": self.n_steps, "n": self.n, "d": self.d,
                      "block": self.block, "read_by_tensor": reads, "write_by_tensor": writes, "written": written,
                      "read": read, "phase": self.phase(ev), "sram_in_use_bytes": ev.sram_in_use_bytes,
                      "tensors": self.tensors, "square": self.square}
        return self.state

    def readout(self) -> str:
        ev = self.state["event"]
        what = {"load": "HBM → SRAM", "store": "SRAM → HBM", "compute": "on chip"}[ev.kind]
        reuse = " — already on chip, 0 HBM bytes" if ev.kind == "load" and ev.nbytes == 0 else ""
        note = f" — {ev.note}" if ev.note and "reused" not in ev.note else ""
        r, w = sum(self.state["read_by_tensor"].values()), sum(self.state["write_by_tensor"].values())
        phase = f"{self.state['phase']}: " if self.state["phase"] else ""
        return (f"step {self.step + 1}/{self.n_steps} — {phase}{ev.kind} {ev.tensor}{list(ev.tile)} {what}, "
                f"{ev.nbytes} B{reuse}{note}. So far: {r} B read, {w} B written; SRAM in use {ev.sram_in_use_bytes} B")

    def figure(self):
        from flashsim.course.ch02.figures import plot_algorithm0_step
        return plot_algorithm0_step(self.state)

    @widget_or_figure
    def show(self):
        import ipywidgets as W
        from flashsim.course.ch05.dashboards import play_controls, png_image_widget, set_png
        text = W.HTML(self.readout())
        img = png_image_widget(self.figure())

        def on_step(i):
            self.update(step=i)
            text.value = self.readout()
            set_png(img, self.figure())

        box, _, _ = play_controls(self.n_steps, on_step, description="step", interval_ms=500, value=self.step)
        return W.VBox([box, text, img])


class Algorithm0Stepper(EventStepper):
    """Chapter 02: standard attention (Algorithm 0) on the simulator, one load / compute / store at a time.

    Runs :func:`flashsim.simulate` ("naive", small N, events recorded) once and replays its events (see
    :class:`EventStepper`); ``sim`` holds the simulation (output, counters, error).
    """

    tensors = ("Q", "K", "V", "S", "P", "O")
    square = ("S", "P")

    def __init__(self, n: int = 8, d: int = 4, block: int = 4, dtype: str = "fp16", seed: int = 0):
        from flashsim.model.simulator import simulate
        if n > 64:
            raise FlashsimError(f"n={n}: the stepper draws every tile; use n <= 64 (and flashsim.traffic for more)")
        self.dtype = dtype
        self.sim = simulate("naive", n, d, block_r=block, block_c=block, dtype=dtype, seed=seed)
        self._init_events(self.sim.events, n, d, block)

    def phase(self, ev) -> str:
        if ev.tensor in ("V", "O") or (ev.tensor == "P" and ev.kind == "load"):
            return "3. O = PV (P read)"
        if ev.tensor == "P" or (ev.tensor == "S" and ev.kind == "load"):
            return "2. P = softmax(S) (S read, P written)"
        return "1. S = QKᵀ (written to HBM)"


class TrafficVsN:
    """Chapter 02: HBM bytes of standard attention (Algorithm 0 and the eager op model) and FlashAttention against N.

    ``update(d=..., dtype=..., n=...)``: `n` is the marked sequence length; ``current`` holds
    :func:`flashsim.traffic` for each algorithm at `n`.
    """

    NS = tuple(2 ** k for k in range(8, 17))        # 256 ... 65536
    ALGOS = (("naive", None), ("eager", "pytorch"), ("flash2", None))

    def __init__(self, n: int = 8192, d: int = 64, dtype: str = "fp16", device: str = "h200"):
        self.n, self.d, self.dtype, self.device = n, d, dtype, device
        self.current: dict = {}
        self.update()

    def _traffic(self, algo, eager_ops, n):
        from flashsim.model.simulator import traffic
        kw = {"eager_ops": eager_ops} if eager_ops else {}
        return traffic(algo, n, self.d, dtype=self.dtype, device=self.device, **kw)

    def key(self, algo, eager_ops) -> str:
        return f"{algo}({eager_ops})" if eager_ops else algo

    def update(self, n: int | None = None, d: int | None = None, dtype: str | None = None,
               device: str | None = None) -> dict:
        if n is not None:
            if int(n) not in self.NS:
                raise FlashsimError(f"n={n}: the dashboard offers {self.NS}")
            self.n = int(n)
        self.d = int(d) if d is not None else self.d
        self.dtype = dtype or self.dtype
        self.device = device or self.device
        self.current = {self.key(a, e): self._traffic(a, e, self.n) for a, e in self.ALGOS}
        return self.current

    def sweep(self) -> dict:
        """{algo key: [hbm_bytes at each N of NS]}"""
        return {self.key(a, e): [self._traffic(a, e, n).hbm_bytes for n in self.NS] for a, e in self.ALGOS}

    def readout(self) -> str:
        parts = [f"{k}: {t.hbm_bytes / 2**20:,.1f} MiB" for k, t in self.current.items()]
        s_mib = self.n * self.n * (2 if self.dtype != "fp32" else 4) / 2**20
        return f"N = {self.n}, d = {self.d}, {self.dtype}: S alone is {s_mib:,.0f} MiB. HBM traffic — " + "; ".join(parts)

    def figure(self):
        from flashsim.course.ch02.figures import plot_traffic_vs_n
        return plot_traffic_vs_n(self.NS, self.sweep(), mark_n=self.n, title=f"d = {self.d}, {self.dtype}, one head")

    @widget_or_figure
    def show(self):
        import ipywidgets as W
        from flashsim.course.ch05.dashboards import png_image_widget, set_png
        text = W.HTML(self.readout())
        img = png_image_widget(self.figure())
        n = W.SelectionSlider(options=self.NS, value=self.n, description="N")
        d = W.Dropdown(options=(32, 64, 128, 256), value=self.d, description="d")
        dt = W.Dropdown(options=("fp16", "bf16", "fp32"), value=self.dtype, description="dtype")

        def redraw(**kw):
            self.update(**kw)
            text.value = self.readout()
            set_png(img, self.figure())

        n.observe(lambda ch: redraw(n=ch["new"]), names="value")
        d.observe(lambda ch: redraw(d=ch["new"]), names="value")
        dt.observe(lambda ch: redraw(dtype=ch["new"]), names="value")
        return W.VBox([W.HBox([n, d, dt]), text, img])


class EagerOpsDashboard:
    """Chapter 02: bytes per forward kernel of standard attention as a framework runs it (bar per op).

    ``update(choice=..., causal=..., dropout=..., n=...)``; ``rows`` is :func:`eager_op_bytes` for the choice.
    """

    def __init__(self, choice: str = "PyTorch eager, op by op", n: int = 1024, d: int = 64, dtype: str = "fp16",
                 causal: bool = True, dropout: bool = True):
        self.choice, self.n, self.d, self.dtype, self.causal, self.dropout = choice, n, d, dtype, causal, dropout
        self.rows: list = []
        self.update()

    def update(self, choice: str | None = None, causal: bool | None = None, dropout: bool | None = None,
               n: int | None = None) -> list:
        if choice is not None:
            if choice not in EAGER_CHOICES:
                raise FlashsimError(f"choice={choice!r}: use one of {list(EAGER_CHOICES)}")
            self.choice = choice
        self.causal = self.causal if causal is None else bool(causal)
        self.dropout = self.dropout if dropout is None else bool(dropout)
        self.n = self.n if n is None else int(n)
        algo, ops = EAGER_CHOICES[self.choice]
        drop = 0.1 if (self.dropout and algo != "naive") else 0.0
        self.rows = eager_op_bytes(self.n, self.d, self.dtype, algo, ops, self.causal, drop)
        return self.rows

    @property
    def total_bytes(self) -> int:
        return sum(r + w for _, r, w in self.rows)

    def readout(self) -> str:
        note = " (Algorithm 0 has no dropout kernel)" if self.dropout and EAGER_CHOICES[self.choice][0] == "naive" else ""
        return (f"{self.choice}: {len(self.rows)} kernels, {self.total_bytes / 2**20:,.1f} MiB of HBM traffic per head "
                f"at N = {self.n}{note}")

    def figure(self):
        from flashsim.course.ch02.figures import plot_eager_ops
        return plot_eager_ops(self.rows, title=f"{self.choice}, N = {self.n}, d = {self.d}, {self.dtype}"
                              + (", causal" if self.causal else "") + (", dropout" if self.dropout else ""))

    @widget_or_figure
    def show(self):
        import ipywidgets as W
        from flashsim.course.ch05.dashboards import png_image_widget, set_png
        text = W.HTML(self.readout())
        img = png_image_widget(self.figure())
        ch = W.Dropdown(options=list(EAGER_CHOICES), value=self.choice, description="framework",
                        layout=W.Layout(width="420px"))
        ca = W.Checkbox(value=self.causal, description="causal mask")
        dr = W.Checkbox(value=self.dropout, description="dropout")

        def redraw(**kw):
            self.update(**kw)
            text.value = self.readout()
            set_png(img, self.figure())

        ch.observe(lambda c: redraw(choice=c["new"]), names="value")
        ca.observe(lambda c: redraw(causal=c["new"]), names="value")
        dr.observe(lambda c: redraw(dropout=c["new"]), names="value")
        return W.VBox([W.HBox([ch, ca, dr]), text, img])
