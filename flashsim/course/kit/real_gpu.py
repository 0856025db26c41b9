"""The "On the real GPU" section that closes every chapter: measured IO next to simulated IO.

Usage (the last cells of every notebook)::

    from flashsim.course.kit.real_gpu import compare
    r = compare("tiled_matmul")              # sizes from flashsim.course.pick: small in CI, larger on a GPU
    r.table()                                # measured vs simulated load/store bytes, and their ratio
    r.plot()                                 # the same as a bar chart (a matplotlib Figure)

Signature (stable; the chapter authors rely on it)::

    compare(kernel_name, *, n=None, d=None, block_m=None, block_n=None, causal=False, dtype="fp16",
            quiet=False) -> Comparison

- ``kernel_name``: as in the CLI ``flashsim measure --kernel``: ``"naive"``, ``"tiled_matmul"``,
  ``"online_softmax"``, ``"flash_fwd"``, ``"flash_bwd"``.
- ``n``, ``d``: problem size as the CLI reads ``--n --d`` (default: :data:`DEFAULT_SIZES`: in the interpreter
  always the small size; on a GPU small or full via :func:`flashsim.course.pick`). ``block_m``/``block_n``: the kernel's tile sizes (default: the kernel's own,
  :func:`flashsim.kernels.default_blocks`). ``causal`` and ``dtype`` ("fp16", "fp32"; "bf16" on a GPU only)
  as in the CLI.
- ``quiet=True`` suppresses the one-line notice about the backend.

What runs where
---------------
- No torch or triton (only ``flashsim[lab]`` installed, or macOS/Windows, where Triton does not ship): one line
  (:func:`flashsim.course.kit.optional.missing`) says what is missing and how to install it, and the result is
  the measurement Nsight Compute recorded on a GPU for the same kernel (:func:`recorded`, read from the package's
  recorded results: ``load_result(RECORDED)``, whose metadata names the GPU and date), next to the simulator's
  prediction for that recorded configuration.
- No CUDA GPU: the kernel runs in the Triton interpreter and :func:`flashsim.measure.count_io` counts the bytes
  each masked load and store touches (exact: it should equal the simulator's prediction byte for byte). A one-line
  notice says so.
- A CUDA GPU: Nsight Compute counters (``flashsim.measure.ncu_profile``) where ncu is installed and counters are
  permitted; otherwise a timing-based estimate. The backend is in ``Comparison.backend``, the reason in
  ``Comparison.notice``. On a GPU the table also shows DRAM bytes, where the L2 cache makes the measured number
  fall below the requested bytes (chapter 09).

The simulated side is :mod:`flashsim.model.kernel_io`: the bytes the same kernel requests at the same sizes and blocks.
Nothing is cached between calls, so re-running a notebook cell measures again and shows the same numbers.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import dataclass, field

from flashsim.course import Table, pick
from flashsim.course.kit.optional import missing
from flashsim.course.kit.results import load_result, measured_on_label, result_source
from flashsim.errors import FlashsimError
from flashsim.model.dtypes import dtype_bytes
from flashsim.model.kernel_io import kernel_io
from flashsim.model.units import byte_unit

__all__ = ["DEFAULT_SIZES", "KERNELS", "Comparison", "LaunchBreakdown", "Table", "by_launch", "compare",
           "kernel_memory", "recorded", "measured_on"]

#: kernel names, as ``flashsim measure --kernel`` spells them, and the chapter that introduces each
KERNELS = {"naive": "02", "tiled_matmul": "03", "online_softmax": "04", "flash_fwd": "05", "flash_bwd": "07"}

#: (small, full) problem sizes: small runs in the interpreter in seconds, full is for a GPU
DEFAULT_SIZES = {
    "naive": {"n": (128, 4096), "d": (32, 64)},
    "tiled_matmul": {"n": (128, 4096), "d": (64, 64)},
    "online_softmax": {"n": (128, 4096), "d": (32, 64)},
    "flash_fwd": {"n": (256, 4096), "d": (64, 64)},
    "flash_bwd": {"n": (128, 2048), "d": (32, 64)},
}

@dataclass
class Comparison:
    """Measured vs simulated IO of one kernel run (the "On the real GPU" section of every chapter)."""

    kernel: str
    config: dict
    backend: str                               # "interpreter", "ncu" or "timing"
    measured_load_bytes: int | None
    measured_store_bytes: int | None
    simulated_load_bytes: int
    simulated_store_bytes: int
    measured_dram_bytes: int | None = None     # GPU with ncu only
    simulated_dram_bytes: int | None = None    # GPU only (the L2 model)
    time_s: float | None = None                # GPU only
    notice: str = ""
    raw: dict = field(default_factory=dict)    # everything flashsim.measure returned

    @staticmethod
    def _ratio(measured, simulated):
        if measured is None or not simulated:
            return None
        return measured / simulated

    @property
    def load_ratio(self) -> float | None:
        """measured / simulated load bytes (1.0: the simulator predicted the kernel exactly)."""
        return self._ratio(self.measured_load_bytes, self.simulated_load_bytes)

    @property
    def store_ratio(self) -> float | None:
        return self._ratio(self.measured_store_bytes, self.simulated_store_bytes)

    @property
    def exact(self) -> bool:
        """Measured equals simulated for loads and stores (what the interpreter should give)."""
        return (self.measured_load_bytes == self.simulated_load_bytes
                and self.measured_store_bytes == self.simulated_store_bytes)

    def rows(self) -> list[list]:
        """[quantity, measured, simulated, measured/simulated] rows (DRAM rows only where measured)."""
        out = [["load bytes", self.measured_load_bytes, self.simulated_load_bytes, self.load_ratio],
               ["store bytes", self.measured_store_bytes, self.simulated_store_bytes, self.store_ratio]]
        if self.measured_dram_bytes is not None or self.simulated_dram_bytes is not None:
            out.append(["DRAM bytes (after L2)", self.measured_dram_bytes, self.simulated_dram_bytes,
                        self._ratio(self.measured_dram_bytes, self.simulated_dram_bytes)])
        return out

    def caption(self) -> str:
        cfg = ", ".join(f"{k}={v}" for k, v in self.config.items() if v is not None)
        return f"{self.kernel} ({cfg}) — measured by {self.backend}"

    def table(self) -> Table:
        """Measured load/store bytes, simulated load/store bytes, and the ratio, as a :class:`Table`."""
        rows = self.rows()
        if self.time_s is not None:
            rows.append(["kernel time (µs)", round(self.time_s * 1e6, 2), None, None])
        if self.raw.get("implied_bandwidth_bytes_per_s"):
            rows.append(["implied DRAM bandwidth (TB/s)", round(self.raw["implied_bandwidth_bytes_per_s"] / 1e12, 3),
                         None, None])
        return Table(["", "measured", "simulated", "measured / simulated"], rows, self.caption())

    def plot(self, ax=None):
        """Grouped bars, measured next to simulated, for loads and stores (and DRAM on a GPU), each pair labelled
        with its ratio. Returns the Figure."""
        from matplotlib.figure import Figure

        if ax is None:
            fig = Figure(figsize=(6.4, 3.4))
            ax = fig.add_subplot()
        else:
            fig = ax.figure
        rows = self.rows()
        top = max([r[1] or 0 for r in rows] + [r[2] or 0 for r in rows] + [1])
        unit, scale = byte_unit(top)
        xs = list(range(len(rows)))
        w = 0.38
        meas = [(r[1] or 0) / scale for r in rows]
        sim = [(r[2] or 0) / scale for r in rows]
        ax.bar([x - w / 2 for x in xs], meas, w, label=f"measured ({self.backend})", color="#d62728")
        ax.bar([x + w / 2 for x in xs], sim, w, label="simulated (flashsim.model.kernel_io)", color="#1f77b4")
        for x, r in zip(xs, rows):
            label = "not measured" if r[1] is None else (f"×{r[3]:.3g}" if r[3] is not None else "")
            ax.text(x, max(meas[x], sim[x]), label, ha="center", va="bottom", fontsize=8)
        ax.set_xticks(xs, [r[0] for r in rows])
        ax.set_ylabel(unit)
        ax.set_ylim(0, max(meas + sim + [1e-9]) * 1.18)
        cfg = ", ".join(f"{k}={v}" for k, v in self.config.items() if v is not None)
        ax.set_title(f"{self.kernel}: measured ({self.backend}) vs simulated\n{cfg}", fontsize=9)
        ax.legend(fontsize=8, loc="upper right")
        fig.tight_layout()
        return fig

    def __str__(self) -> str:
        return (self.notice + "\n" if self.notice else "") + str(self.table())

    def _repr_html_(self) -> str:
        note = f"<p><i>{self.notice}</i></p>" if self.notice else ""
        return note + self.table()._repr_html_()


def _interpreter() -> bool:
    from flashsim import kernels
    return bool(kernels.INTERPRETER)


def _default(kernel: str, key: str, value, interpreter: bool):
    """An explicit value wins; else the small size in the interpreter (always), else pick(small, full)."""
    if value is not None:
        return int(value)
    small, full = DEFAULT_SIZES[kernel][key]
    return small if interpreter else pick(small=small, full=full)


def _measure_in_process(kernel: str, cfg: dict) -> dict | None:
    """The CLI's JSON dict, in-process (:func:`flashsim.measure.measure_cli_result`); None if it is missing."""
    try:
        from flashsim import measure
    except ImportError:
        return None
    fn = getattr(measure, "measure_cli_result", None)
    if fn is None:
        return None
    from flashsim.kernels import default_blocks
    bm, bn = default_blocks(kernel, cfg["d"])
    return dict(fn(kernel, cfg["n"], cfg["d"], cfg["block_m"] or bm, cfg["block_n"] or bn, cfg["causal"],
                   cfg["dtype"]))


def _measure_cli(kernel: str, cfg: dict) -> dict:
    """Run ``flashsim measure ... --json`` in a subprocess and parse its one JSON object."""
    args = ["measure", "--kernel", kernel, "--n", str(cfg["n"]), "--d", str(cfg["d"])]
    if cfg.get("block_m"):
        args += ["--block-m", str(cfg["block_m"])]
    if cfg.get("block_n"):
        args += ["--block-n", str(cfg["block_n"])]
    if cfg.get("causal"):
        args.append("--causal")
    args += ["--dtype", cfg["dtype"], "--json"]
    code = "import sys; from flashsim.cli import main; sys.exit(main())"
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise FlashsimError(f"`flashsim {' '.join(args)}` failed (exit {proc.returncode}): "
                            f"{(proc.stderr or proc.stdout).strip()[-800:]}")
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip().startswith("{")]
    if not lines:
        raise FlashsimError(f"`flashsim {' '.join(args)}` printed no JSON object: {proc.stdout[-400:]!r}")
    return json.loads(lines[-1])


def _time_s(raw: dict):
    if raw.get("duration_ns") is not None:
        return float(raw["duration_ns"]) * 1e-9
    if raw.get("duration_ms") is not None:
        return float(raw["duration_ms"]) * 1e-3
    return None


def _notice(backend: str, raw: dict) -> str:
    given = raw.get("notice") or raw.get("note") or raw.get("fallback_reason")
    if backend == "interpreter":
        return ("No CUDA GPU here: the kernel ran in the Triton interpreter at a small size, and the bytes are "
                "counted by hooking its loads and stores.")
    if backend == "ncu":
        return given or NCU_NOTICE
    return given or ("ncu counters were not available: measured bytes are estimated from the kernel's time and the "
                     "preset's bandwidth.")


#: what Nsight Compute's columns are, said once under every GPU table
NCU_NOTICE = ("Measured on this GPU with Nsight Compute (ncu) counters, launch by launch: load and store bytes are "
              "what the kernel's loads and stores request from the L1 (32-byte sectors), the same on every run; DRAM "
              "bytes are what got past the L2 to memory on this run, and differ a little from run to run.")


def measured_on(name: str) -> str:
    """"measured on <GPU>, <date>": where and when a recorded result says it was measured, in its own metadata
    (:func:`flashsim.course.kit.results.measured_on_label`). What a chapter prints next to a recorded number, so that
    the number says where and when it was measured."""
    return measured_on_label(load_result(name))


_VIEW_KEYS = ("n", "d", "block_m", "block_n", "causal", "dtype", "batch", "heads")
RECORDED = "kernels_h100"  #: the recorded ncu sweep of the current kernels that :func:`recorded` reads


def recorded(kernel_name: str, *, n: int | None = None, d: int | None = None, block_m: int | None = None,
             block_n: int | None = None, causal: bool = False, dtype: str = "fp16", notice: str = "") -> Comparison:
    """The measurement recorded on a GPU for ``kernel_name``, as a :class:`Comparison` (no torch or triton needed).

    From the ncu sweep :data:`RECORDED` (``load_result(RECORDED)["ncu_sweep"]``, set "sweep"): the run of
    the same kernel nearest to the asked size (default: the full size of :data:`DEFAULT_SIZES`), preferring the
    same ``causal``, ``dtype`` and (where given) tile sizes. Measured: Nsight Compute's global load/store and DRAM bytes and the kernel
    time; simulated: the kernel view's L1 bytes for that configuration (what ncu's global load/store bytes count)
    and the DRAM prediction recorded with it.
    """
    if kernel_name not in KERNELS:
        raise FlashsimError(f"unknown kernel {kernel_name!r}: use one of {sorted(KERNELS)}")
    data = load_result(RECORDED)
    runs = [r for r in data["ncu_sweep"] if r.get("set") == "sweep" and r["config"]["kernel"] == kernel_name
            and r["measured"].get("backend") == "ncu"]
    if not runs:
        raise FlashsimError(f"no recorded GPU run of {kernel_name!r} in {result_source(RECORDED)}")
    want_n = n or DEFAULT_SIZES[kernel_name]["n"][1]
    want_d = d or DEFAULT_SIZES[kernel_name]["d"][1]

    def distance(run):
        c = run["config"]
        blocks = sum(want is not None and c[key] != want for key, want in (("block_m", block_m), ("block_n", block_n)))
        return (c["causal"] != bool(causal), c["dtype"] != dtype, blocks,
                abs(math.log2(c["n"] / want_n)) + abs(math.log2(max(c["d"], 1) / want_d)))

    run = min(runs, key=distance)
    cfg, total, sim = dict(run["config"]), run["measured"]["total"], run["simulated"]
    cfg.pop("kernel", None)
    # today's kernel view of the recorded configuration: ncu's global bytes are the L1's (32-byte sectors)
    view = kernel_io(kernel_name, **{k: cfg[k] for k in _VIEW_KEYS if k in cfg})
    gpu = data.get("versions", {}).get("gpu", "a GPU")
    source = result_source(RECORDED)
    note = f"Nsight Compute's counters, {measured_on(RECORDED)}."
    return Comparison(kernel=kernel_name, config=cfg, backend=f"ncu on {gpu}, recorded",
                      measured_load_bytes=int(total["global_load_bytes"]),
                      measured_store_bytes=int(total["global_store_bytes"]),
                      simulated_load_bytes=view.l1_load_bytes, simulated_store_bytes=view.l1_store_bytes,
                      measured_dram_bytes=int(total["dram_read_bytes"] + total["dram_write_bytes"]),
                      simulated_dram_bytes=int(sim["dram_read_bytes"] + sim["dram_write_bytes"]),
                      time_s=float(total["duration_ns"]) * 1e-9 if total.get("duration_ns") else None,
                      notice=f"{notice} {note}".strip(), raw={"recorded": run, "source": source})


def compare(kernel_name: str, *, n: int | None = None, d: int | None = None, block_m: int | None = None,
            block_n: int | None = None, causal: bool = False, dtype: str = "fp16", quiet: bool = False
            ) -> Comparison:
    """Run one of the course's Triton kernels, measure its IO, and put it next to the simulator's prediction.

    See the module docstring for the arguments and for what runs where. Prints a one-line notice about the
    backend unless ``quiet``; returns a :class:`Comparison` with ``.table()`` and ``.plot()``. Introduced in
    chapter 00; every chapter ends with it.
    """
    if kernel_name not in KERNELS:
        raise FlashsimError(f"unknown kernel {kernel_name!r}: use one of {sorted(KERNELS)}")
    why = missing("kernels")
    if why is not None:  # no torch/triton here: say so in one line, then show what a GPU measured
        result = recorded(kernel_name, n=n, d=d, block_m=block_m, block_n=block_n, causal=causal, dtype=dtype,
                          notice=why)
        if not quiet:
            print(result.notice)
        return result
    interpreter = _interpreter()
    cfg = {"n": _default(kernel_name, "n", n, interpreter), "d": _default(kernel_name, "d", d, interpreter),
           "block_m": int(block_m) if block_m else None, "block_n": int(block_n) if block_n else None,
           "causal": bool(causal), "dtype": str(dtype)}
    raw = _measure_in_process(kernel_name, cfg)
    if raw is None:
        raw = _measure_cli(kernel_name, cfg)
    backend = str(raw.get("backend", "interpreter"))

    def get(key):
        v = raw.get(key)
        return None if v is None else int(v)

    for key in ("block_m", "block_n"):
        if raw.get(key) is not None:
            cfg[key] = int(raw[key])
    result = Comparison(kernel=kernel_name, config=cfg, backend=backend,
                        measured_load_bytes=get("measured_load_bytes"),
                        measured_store_bytes=get("measured_store_bytes"),
                        simulated_load_bytes=get("simulated_load_bytes") or 0,
                        simulated_store_bytes=get("simulated_store_bytes") or 0,
                        measured_dram_bytes=get("measured_dram_bytes"),
                        simulated_dram_bytes=get("simulated_dram_bytes"),
                        time_s=_time_s(raw),
                        notice=_notice(backend, raw), raw=raw)
    if not quiet:
        print(result.notice)
    return result


# --- what each chapter measures: per launch and tensor (02, 05, 07), memory (06) ------------------------------------

INTERPRETER_PROOF = (
    "In the interpreter the hooks count the loads and stores the kernel's source asks for, and the kernel view "
    "predicts the same loads from the same loop: equal columns are a consistency check of the loop (which tile "
    "moves, how often), not a hardware measurement. Caches, sectors, coalescing and time are what a GPU adds.")


@dataclass
class LaunchBreakdown:
    """Measured vs simulated bytes of one kernel call, launch by launch and tensor by tensor (chapters 02, 05, 07).

    ``rows``: [launch, tensor, measured loads, simulated loads, measured stores, simulated stores]; on a GPU (and in
    a recorded run) the counters are per launch, so the tensor column reads "all" and each row holds the launch's
    totals. ``measured(launch, tensor, "loads")`` and ``simulated(...)`` read one entry: ``tensor="all"`` the
    launch's total on every backend; a single tensor is measured only in the interpreter (None on a GPU, where
    ``simulated`` still gives the kernel view's bytes for it)."""

    kernel: str
    config: dict
    backend: str
    rows: list
    notice: str = ""
    view: dict = field(default_factory=dict)   # the kernel view per launch: {launch: {"loads": {..}, "stores": {..}}}

    def round_trips(self) -> Table:
        """Tensors that make a round trip through global memory: stored by one launch, loaded by a later one (S and
        P in standard attention, the backward's D). Bytes per tensor as measured where the counts are per tensor
        (the interpreter), else as the kernel view predicts them."""
        per_tensor = self.per_tensor
        launches = list(self.view)
        rows = []
        for i, writer in enumerate(launches):
            for t, stored in self.view[writer]["stores"].items():
                for reader in launches[i + 1:]:
                    if t in self.view[reader]["loads"]:
                        rows.append([t, writer, self.measured(writer, t, "stores") if per_tensor else stored,
                                     reader, self.measured(reader, t) if per_tensor else
                                     self.view[reader]["loads"][t]])
        how = "measured" if per_tensor else "the kernel view's bytes (the GPU counts per launch, not per tensor)"
        return Table(["tensor", "stored by", "bytes stored", "loaded by", "bytes loaded"], rows,
                     f"{self.kernel}: round trips through global memory — {how}")

    @property
    def per_tensor(self) -> bool:
        """Whether the measured columns are per tensor (the interpreter) or per launch (a GPU's counters)."""
        return not any(r[1] == "all" for r in self.rows)

    def _get(self, launch: str, tensor: str, kind: str, col: int):
        col += 0 if kind == "loads" else 2
        rows = [r for r in self.rows if r[0] == launch]
        if tensor == "all":
            values = [r[col] for r in rows]
            return None if any(x is None for x in values) else sum(values)
        for r in rows:
            if r[1] == tensor:
                return r[col]
        if self.per_tensor or not rows:
            return 0
        if col in (3, 5):                                 # simulated: the kernel view has every tensor
            return self.view.get(launch, {}).get(kind, {}).get(tensor, 0)
        return None                                       # measured per launch only: no number for one tensor

    def measured(self, launch: str, tensor: str, kind: str = "loads"):
        return self._get(launch, tensor, kind, 2)

    def simulated(self, launch: str, tensor: str, kind: str = "loads"):
        return self._get(launch, tensor, kind, 3)

    def launches(self) -> list:
        """The launches, in the order the kernel makes them."""
        return list(dict.fromkeys(r[0] for r in self.rows))

    @property
    def exact(self) -> bool:
        return all(r[2] == r[3] and r[4] == r[5] for r in self.rows)

    def table(self) -> Table:
        cfg = ", ".join(f"{k}={v}" for k, v in self.config.items() if v is not None)
        return Table(["launch", "tensor", "loads measured", "loads simulated", "stores measured", "stores simulated"],
                     self.rows, f"{self.kernel} ({cfg}), launch by launch — measured by {self.backend}")

    def __str__(self) -> str:
        return (self.notice + "\n" if self.notice else "") + str(self.table())

    def _repr_html_(self) -> str:
        note = f"<p><i>{self.notice}</i></p>" if self.notice else ""
        return note + self.table()._repr_html_()


def _tensor_rows(name: str, measured: dict | None, simulated: dict) -> list:
    tensors = list(dict.fromkeys([*simulated["loads"], *simulated["stores"], *(measured or {}).get("loads", {}),
                                  *(measured or {}).get("stores", {})]))
    m = measured or {"loads": {}, "stores": {}}
    return [[name, t, m["loads"].get(t, 0) if measured else None, simulated["loads"].get(t, 0),
             m["stores"].get(t, 0) if measured else None, simulated["stores"].get(t, 0)] for t in tensors]


def _match_launches(names: list, launches: list) -> dict:
    """{view launch name: ncu launch record}: by name (ncu may print a longer, decorated name that starts with the
    function's), else by position when ncu reports exactly as many launches as the view has (the last ones: a
    backward's forward pass comes first)."""
    out = {}
    for name in names:
        hit = next((L for L in launches if L["kernel"] == name), None) or next(
            (L for L in launches if str(L["kernel"]).startswith(name)), None)
        if hit is not None:
            out[name] = hit
    if len(out) < len(names) and len(launches) >= len(names):
        out = dict(zip(names, launches[-len(names):]))
    return out


def by_launch(kernel_name: str, *, n: int | None = None, d: int | None = None, block_m: int | None = None,
              block_n: int | None = None, causal: bool = False, dtype: str = "fp16", quiet: bool = False
              ) -> LaunchBreakdown:
    """Run ``kernel_name`` once and show its bytes launch by launch: measured next to the kernel view.

    Interpreter: :func:`flashsim.measure.count_io` per launch and tensor, against
    :func:`flashsim.model.kernel_io.kernel_io`'s element bytes. GPU: Nsight Compute's global load/store bytes per
    launch (:func:`flashsim.measure.ncu_profile`) against the view's L1 bytes; without counters, the simulated
    column alone. Without torch/triton: the recorded ncu run nearest to the asked size (:func:`recorded`).
    Arguments as :func:`compare`."""
    if kernel_name not in KERNELS:
        raise FlashsimError(f"unknown kernel {kernel_name!r}: use one of {sorted(KERNELS)}")
    why = missing("kernels")
    if why is not None:
        rec = recorded(kernel_name, n=n, d=d, block_m=block_m, block_n=block_n, causal=causal, dtype=dtype,
                       notice=why)
        cfg = rec.config
        view = kernel_io(kernel_name, **{k: cfg[k] for k in _VIEW_KEYS if k in cfg})
        got = {L["kernel"]: L for L in rec.raw["recorded"]["measured"]["launches"]}
        rows = [[L.name, "all", int(got[L.name]["global_load_bytes"]) if L.name in got else None, L.l1_load_bytes,
                 int(got[L.name]["global_store_bytes"]) if L.name in got else None, L.l1_store_bytes]
                for L in view.launches]
        if not quiet:
            print(rec.notice)
        return LaunchBreakdown(kernel_name, cfg, rec.backend, rows, rec.notice, view.per_tensor())
    from flashsim import measure
    from flashsim.kernels import default_blocks
    interpreter = _interpreter()
    cfg = {"n": _default(kernel_name, "n", n, interpreter), "d": _default(kernel_name, "d", d, interpreter)}
    bm, bn = default_blocks(kernel_name, cfg["d"])
    cfg.update(block_m=int(block_m or bm), block_n=int(block_n or bn), causal=bool(causal), dtype=str(dtype))
    args = (kernel_name, cfg["n"], cfg["d"], cfg["block_m"], cfg["block_n"], cfg["causal"], cfg["dtype"])
    view = kernel_io(*args)
    if interpreter:
        got = measure.count_io(measure.kernel_runner(*args)).per_tensor()
        rows = [r for L in view.launches
                for r in _tensor_rows(L.name, got.get(L.name), {"loads": L.loads, "stores": L.stores})]
        backend, notice = "interpreter", INTERPRETER_PROOF
    else:
        prof = measure.ncu_profile(*args)
        backend = str(prof["backend"])
        got = _match_launches([L.name for L in view.launches], prof.get("launches", []))
        rows = [[L.name, "all", int(got[L.name]["global_load_bytes"]) if L.name in got else None, L.l1_load_bytes,
                 int(got[L.name]["global_store_bytes"]) if L.name in got else None, L.l1_store_bytes]
                for L in view.launches]
        notice = _notice(backend, prof)
        if backend == "ncu":
            notice += (" Nsight Compute counts per launch, not per tensor: each row is one launch's total, next to "
                       "the kernel view's total for that launch.")
        else:
            notice += " Without counters only the kernel view's column is filled."
    if not quiet:
        print(notice)
    return LaunchBreakdown(kernel_name, cfg, backend, rows, notice, view.per_tensor())


#: torch's CUDA caching allocator rounds every allocation up to a multiple of 512 bytes
ALLOCATOR_BLOCK_BYTES = 512


def _allocated(nbytes: int, block: int) -> int:
    """``nbytes`` rounded up to whole allocator blocks."""
    return -(-int(nbytes) // block) * block


#: (small, full) sizes of :func:`kernel_memory`: the interpreter always takes the small ones
MEMORY_SIZES = {"ns": ((128, 256, 512), (1024, 2048, 4096, 8192)), "d": (32, 64)}


def kernel_memory(ns=None, d: int | None = None, dtype: str = "fp16", quiet: bool = False) -> dict:
    """The global memory the naive and the flash forward kernels need beyond their inputs, as N grows (chapter 06).

    ``ns``, ``d``: default :data:`MEMORY_SIZES` (in the interpreter always the small ones; on a GPU via ``pick``).

    GPU: the peak growth of torch's allocator during each call (:func:`flashsim.measure.peak_memory.peak_memory_gpu`):
    naive holds S and P (fp32, N×N each), flash only O and the logsumexp. Interpreter: the bytes each kernel's
    launches store, tensor by tensor (:func:`flashsim.measure.count_io`): every byte of S, P, O and L is written
    once, so the stored bytes are the sizes of the tensors the kernel had to allocate (a count of the source's
    stores, not an allocator's peak). Without torch/triton: the recorded GPU measurement of torch's naive attention
    and SDPA's flash backend. Returns {"backend", "ns", "naive", "flash", "notice"} (bytes per N)."""
    why = missing("kernels")
    if why is not None:
        rec = load_result("cpu_peak_memory")["gpu"]
        rows = [r for r in rec["rows"] if r.get("torch naive") is not None and r.get("torch SDPA (flash)") is not None]
        out = {"backend": f"torch naive vs SDPA's flash backend, {measured_on('cpu_peak_memory')}, "
                          f"{rows[0]['heads']} heads",
               "ns": [r["N"] for r in rows], "naive": [r["torch naive"] for r in rows],
               "flash": [r["torch SDPA (flash)"] for r in rows], "notice": why,
               "naive_model": None, "flash_model": None}
        if not quiet:
            print(why)
        return out
    from flashsim import kernels, measure
    from flashsim.measure.peak_memory import peak_memory_gpu
    small = _interpreter()
    ns = tuple(ns) if ns is not None else MEMORY_SIZES["ns"][0] if small else pick(*MEMORY_SIZES["ns"])
    d = int(d) if d is not None else MEMORY_SIZES["d"][0] if small else pick(*MEMORY_SIZES["d"])
    b = dtype_bytes(dtype)
    # the tensors each kernel allocates: naive S and P (fp32, N×N) and O; flash O and the fp32 logsumexp L. On a GPU
    # torch's allocator hands out whole blocks of ALLOCATOR_BLOCK_BYTES, so each tensor is counted rounded up
    block = 1 if small else ALLOCATOR_BLOCK_BYTES
    out = {"ns": list(ns), "naive": [], "flash": [],
           "naive_model": [sum(_allocated(x, block) for x in (n * n * 4, n * n * 4, n * d * b)) for n in ns],
           "flash_model": [sum(_allocated(x, block) for x in (n * d * b, 4 * n)) for n in ns]}
    if _interpreter():
        out["backend"] = "interpreter: bytes stored by each kernel's launches"
        for n in ns:
            for name, key in (("naive", "naive"), ("flash_fwd", "flash")):
                bm, bn = kernels.default_blocks(name, d)
                c = measure.count_io(measure.kernel_runner(name, n, d, bm, bn, False, dtype))
                out[key].append(c.store_bytes)
        out["notice"] = ("Counted in the Triton interpreter: the bytes each kernel stores to global memory, which is "
                         "every tensor it must allocate besides its inputs.")
    else:
        import torch
        out["backend"] = f"{torch.cuda.get_device_name()}: torch.cuda.max_memory_allocated during the call"
        for n in ns:
            q, k, v = measure.make_inputs("flash_fwd", n, d, dtype)
            out["naive"].append(peak_memory_gpu(kernels.naive_attention, q, k, v))
            out["flash"].append(peak_memory_gpu(kernels.flash_forward, q, k, v))
        out["notice"] = ("Measured by torch's CUDA allocator: the peak memory each kernel call added (the allocator "
                         f"hands out whole {ALLOCATOR_BLOCK_BYTES}-byte blocks, so a small tensor takes at least one).")
    if not quiet:
        print(out["notice"])
    return out
