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
  the measurement recorded by Nsight Compute on an NVIDIA H200 for the same kernel (:func:`recorded`, read from
  the package's recorded results: ``load_result("kernels_h200")``), next to the simulator's prediction for that
  recorded configuration.
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
from flashsim.course.kit.results import load_result, result_source
from flashsim.errors import FlashsimError
from flashsim.model.kernel_io import kernel_io

__all__ = ["DEFAULT_SIZES", "KERNELS", "Comparison", "Table", "compare", "recorded"]

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

_FIELDS = ("backend", "measured_load_bytes", "measured_store_bytes", "simulated_load_bytes",
           "simulated_store_bytes", "measured_dram_bytes", "simulated_dram_bytes")


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
        scale, unit = next((s, u) for s, u in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "bytes")) if top >= s)
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
        return given or "Measured with Nsight Compute (ncu) counters on the GPU."
    return given or ("ncu counters were not available: measured bytes are estimated from the kernel's time and the "
                     "preset's bandwidth.")


_VIEW_KEYS = ("n", "d", "block_m", "block_n", "causal", "dtype", "batch", "heads")
RECORDED = "kernels_h200"  #: the recorded ncu sweep :func:`recorded` reads (flashsim/course/recorded/)


def recorded(kernel_name: str, *, n: int | None = None, d: int | None = None, block_m: int | None = None,
             block_n: int | None = None, causal: bool = False, dtype: str = "fp16", notice: str = "") -> Comparison:
    """The measurement recorded on a GPU for ``kernel_name``, as a :class:`Comparison` (no torch or triton needed).

    From the ncu sweep :data:`RECORDED` (``load_result("kernels_h200")["ncu_sweep"]``, set "sweep"): the run of
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
    versions = data.get("versions", {})
    gpu, date = versions.get("gpu", "a GPU"), str(versions.get("date_utc", ""))[:10]
    source = result_source(RECORDED)
    note = f"Recorded by Nsight Compute on an {gpu} ({date}; {source})."
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
