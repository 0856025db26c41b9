"""Chapter 02 dashboards: Algorithm 0 stepped event by event, traffic vs N, and the eager framework's op bytes.

    s = Algorithm0Stepper(n=8, d=4, block=4); s.update(step=10); s.state["read_by_tensor"]
    t = TrafficVsN(); t.update(d=128); t.current["naive"].hbm_bytes
    e = EagerOpsDashboard(); e.update(preset="megatron2020"); e.rows      # [(op, read, write), ...]
"""
from __future__ import annotations

from flashsim.course.ch02.figures import EagerOpsPlot, TileStepPlot, TrafficVsNPlot
from flashsim.course.ch02.traffic import (EAGER_CHOICES, TRAFFIC_ALGOS, TRAFFIC_NS, algo_key, eager_op_bytes,
                                          traffic_at, traffic_sweep)
from flashsim.course.kit.dashboard import Dashboard, choice, int_range, slider, toggle
from flashsim.errors import FlashsimError
from flashsim.model.simulator import simulate

__all__ = ["EventStepper", "Algorithm0Stepper", "TrafficVsN", "EagerOpsDashboard", "eager_op_bytes", "EAGER_CHOICES"]


class EventStepper(Dashboard):
    """Replay an event log of the simulated memory one load / compute / store at a time (chapter 02; chapter 03's
    tiled QKᵀ reuses it).

    ``update(step=i)`` moves to step i; ``state`` says which tile each tensor has in play, which tiles were read
    and written so far, and the HBM bytes read and written per tensor up to and including step i. Subclasses set
    ``events`` (load, compute and store events; "free" events only release SRAM), ``tensors``, ``square``
    (the N×N tensors) and ``phase(event)``.
    """

    tensors: tuple = ()
    square: tuple = ()
    plot = TileStepPlot
    interval_ms = 500     # the Play button's interval

    def _init_events(self, events, n: int, d: int, block: int) -> None:
        self.n, self.d, self.block = n, d, block
        self.events = [e for e in events if e.kind in ("load", "compute", "store")]
        self.n_steps = len(self.events)
        totals: dict = {}
        for e in self.events:
            if e.kind in ("load", "store"):
                totals[(e.kind, e.tensor)] = totals.get((e.kind, e.tensor), 0) + e.nbytes
        self.bytes_max = max(totals.values(), default=0)    # the largest bar at the end of the run
        self.step = 0
        self.state: dict = {}
        self.update(step=0)

    def phase(self, event) -> str:
        return ""

    def controls(self):
        return {"step": int_range("step", 0, self.n_steps - 1, play_ms=self.interval_ms, width="60%")}

    def apply(self, step: int | None = None) -> dict:
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
                      "tensors": self.tensors, "square": self.square, "bytes_max": self.bytes_max}
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

    def plot_args(self) -> dict:
        return {"state": self.state}


class Algorithm0Stepper(EventStepper):
    """Chapter 02: standard attention (Algorithm 0) on the simulator, one load / compute / store at a time.

    Runs :func:`flashsim.simulate` ("naive", small N, events recorded) once and replays its events (see
    :class:`EventStepper`); ``sim`` holds the simulation (output, counters, error).
    """

    tensors = ("Q", "K", "V", "S", "P", "O")
    square = ("S", "P")

    def __init__(self, n: int = 8, d: int = 4, block: int = 4, dtype: str = "fp16", seed: int = 0):
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


class TrafficVsN(Dashboard):
    """Chapter 02: HBM bytes of standard attention (Algorithm 0 and the eager op model) and FlashAttention against N.

    ``update(d=..., dtype=..., n=...)``: `n` is the marked sequence length; ``current`` holds
    :func:`flashsim.traffic` for each algorithm at `n`.
    """

    NS = TRAFFIC_NS        # 256 ... 65536
    ALGOS = TRAFFIC_ALGOS
    plot = TrafficVsNPlot

    def __init__(self, n: int = 8192, d: int = 64, dtype: str = "fp16", device: str = "h200"):
        self.n, self.d, self.dtype, self.device = n, d, dtype, device
        self.current: dict = {}
        self._sweeps: dict = {}
        self.update()

    def controls(self):
        return {"n": slider("N", [(f"{n:,}", n) for n in self.NS]), "d": choice("d", (32, 64, 128, 256)),
                "dtype": choice("dtype", ("fp16", "bf16", "fp32"))}

    def key(self, algo, eager_ops) -> str:
        return algo_key(algo, eager_ops)

    def apply(self, n: int | None = None, d: int | None = None, dtype: str | None = None,
              device: str | None = None) -> dict:
        if n is not None:
            if int(n) not in self.NS:
                raise FlashsimError(f"n={n}: the dashboard offers {self.NS}")
            self.n = int(n)
        self.d = int(d) if d is not None else self.d
        self.dtype = dtype or self.dtype
        self.device = device or self.device
        self.current = {self.key(a, e): traffic_at(a, e, self.n, self.d, self.dtype, self.device)
                        for a, e in self.ALGOS}
        return self.current

    def sweep(self) -> dict:
        """{algo key: [hbm_bytes at each N of NS]} (memoised: moving N does not recompute the lines)"""
        key = (self.d, self.dtype, self.device)
        if key not in self._sweeps:
            self._sweeps[key] = traffic_sweep(self.NS, self.d, self.dtype, self.device)
        return self._sweeps[key]

    def readout(self) -> str:
        parts = [f"{k}: {t.hbm_bytes / 2**20:,.1f} MiB" for k, t in self.current.items()]
        s_mib = self.n * self.n * (2 if self.dtype != "fp32" else 4) / 2**20
        return f"N = {self.n}, d = {self.d}, {self.dtype}: S alone is {s_mib:,.0f} MiB. HBM traffic — " + "; ".join(parts)

    def plot_args(self) -> dict:
        return {"ns": list(self.NS), "sweep": self.sweep(), "mark_n": self.n,
                "title": f"d = {self.d}, {self.dtype}, one head"}


class EagerOpsDashboard(Dashboard):
    """Chapter 02: bytes per forward kernel of standard attention as a framework runs it (bar per op).

    ``update(choice=..., causal=..., dropout=..., n=...)``; ``rows`` is :func:`eager_op_bytes` for the choice.
    """

    plot = EagerOpsPlot

    def __init__(self, choice: str = "PyTorch eager, op by op", n: int = 1024, d: int = 64, dtype: str = "fp16",
                 causal: bool = True, dropout: bool = True):
        self.choice, self.n, self.d, self.dtype, self.causal, self.dropout = choice, n, d, dtype, causal, dropout
        self.rows: list = []
        self.update()

    def controls(self):
        return {"choice": choice("framework", list(EAGER_CHOICES), width="420px"),
                "causal": toggle("causal mask"), "dropout": toggle("dropout")}

    def apply(self, choice: str | None = None, causal: bool | None = None, dropout: bool | None = None,
              n: int | None = None) -> list:
        if choice is not None:
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

    def plot_args(self) -> dict:
        return {"rows": self.rows, "title": f"{self.choice}, N = {self.n}, d = {self.d}, {self.dtype}"
                + (", causal" if self.causal else "") + (", dropout" if self.dropout else "")}
