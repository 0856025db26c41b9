"""Measuring the real kernels' IO, to compare with the simulator's kernel view (chapters 05-09).

* :func:`count_io` (interpreter): runs a kernel call with the Triton interpreter's load/store hooked and counts
  the bytes each masked load and store touches (only elements whose mask is true), per launch and per tensor.
  An atomic read-modify-write (``tl.atomic_add`` etc.) counts as both a load and a store of its elements.
* :func:`ncu_profile` (GPU): runs a kernel under Nsight Compute in a child process and returns, per kernel,
  DRAM read/write bytes, L2 bytes, global load/store bytes and duration. Without ncu, or without permission to
  read counters (ERR_NVGPUCTRPERM), it says so in one line and falls back to a timing-based estimate.
* :func:`bench`: the median time of a call (``triton.testing.do_bench`` on a GPU).
* :func:`measure_cli_result`, :func:`add_measure_arguments`, :func:`run_measure`: the ``flashsim measure`` CLI.
"""
from __future__ import annotations

import csv
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from flashsim.errors import FlashsimError
from flashsim.model.kernel_io import KERNELS, kernel_dram, kernel_io

# --- count_io: hooks on the Triton interpreter ------------------------------------------------------------


@dataclass
class IOCount:
    """Bytes a kernel call loaded and stored, as the interpreter saw them.

    ``launches``: one dict per kernel launch, in order: {"name", "loads": {tensor: bytes}, "stores": {...}}.
    Tensors are named by the kernel's argument names (Q, K, ...); addresses outside every tensor argument
    are counted under "?".
    """
    load_bytes: int = 0
    store_bytes: int = 0
    launches: list = field(default_factory=list)
    result: object = None

    def per_tensor(self) -> dict:
        """{launch name: {"loads": {...}, "stores": {...}}} (launches of one name are added together)."""
        out: dict = {}
        for L in self.launches:
            e = out.setdefault(L["name"], {"loads": {}, "stores": {}})
            for kind in ("loads", "stores"):
                for t, b in L[kind].items():
                    e[kind][t] = e[kind].get(t, 0) + b
        return out


def _interp_modules():
    from triton.runtime import interpreter as interp
    return interp, interp.InterpreterBuilder, interp.GridExecutor


def count_io(kernel_call, *args, **kwargs) -> IOCount:
    """Run ``kernel_call(*args, **kwargs)`` in the Triton interpreter, counting the bytes of every load and store.

    Hooks ``InterpreterBuilder.create_masked_load``/``create_masked_store`` (and ``create_load``/``create_store``,
    which delegate to them on the Triton versions we support, 3.6 and 3.9; nested calls are counted once) plus
    ``GridExecutor.__call__`` to learn each launch's name and tensor arguments. ``create_atomic_rmw`` (what
    ``tl.atomic_add`` and the other read-modify-write atomics become; where the interpreter has it) is hooked too:
    its masked elements count as load bytes and as store bytes, the read and the write an atomic does in L2. The
    hooks are restored afterwards, also when the call raises. The call's return value is in ``.result``.
    """
    from flashsim import kernels
    if not kernels.INTERPRETER:
        raise FlashsimError("count_io needs the Triton interpreter (it hooks the interpreter's loads and stores); "
                            "on a GPU use ncu_profile, or set TRITON_INTERPRET=1 before importing flashsim.kernels")
    kernels.interpreter_self_check()     # run once before hooking, so its 10-element kernel is never counted
    interp, Builder, Grid = _interp_modules()
    counts = IOCount()
    state = {"depth": 0, "launch": None, "ranges": None}

    def tensor_of(addrs: np.ndarray) -> list:
        starts, ends, names = state["ranges"]
        idx = np.searchsorted(starts, addrs, side="right") - 1
        out = {}
        for u, c in zip(*np.unique(idx, return_counts=True)):
            name = names[u] if u >= 0 and addrs[idx == u].max() < ends[u] else "?"
            out[name] = out.get(name, 0) + int(c)
        return out

    def record(kind: str, ptrs, mask) -> None:
        ptr_data = np.asarray(ptrs.data)
        elem = ptrs.get_element_ty()
        nbytes = max(1, elem.primitive_bitwidth // 8)
        m = np.broadcast_to(np.asarray(mask.data, dtype=bool), ptr_data.shape) if mask is not None else \
            np.ones(ptr_data.shape, dtype=bool)
        addrs = ptr_data[m].astype(np.uint64).ravel()
        total = int(addrs.size) * nbytes
        if kind == "load":
            counts.load_bytes += total
        else:
            counts.store_bytes += total
        launch = state["launch"]
        if launch is None or addrs.size == 0:
            return
        bucket = launch["loads" if kind == "load" else "stores"]
        for name, n in tensor_of(addrs).items():
            bucket[name] = bucket.get(name, 0) + n * nbytes

    orig = {name: getattr(Builder, name) for name in
            ("create_masked_load", "create_masked_store", "create_load", "create_store")}
    orig_rmw = getattr(Builder, "create_atomic_rmw", None)      # guarded: present in triton 3.6 and 3.9
    orig_call = Grid.__call__

    def wrap(name, kind, mask_pos, implicit_mask):
        fn = orig[name]

        def hooked(self, *a, **kw):
            if state["depth"] == 0:
                ptrs = a[0] if a else kw.get("ptrs", kw.get("ptr"))
                if implicit_mask:
                    mask = None
                else:
                    mask = a[mask_pos] if len(a) > mask_pos else kw.get("mask")
                record(kind, ptrs, mask)
            state["depth"] += 1
            try:
                return fn(self, *a, **kw)
            finally:
                state["depth"] -= 1
        return hooked

    def hooked_rmw(self, rmwOp, ptr, val, mask, *a, **kw):
        if state["depth"] == 0:          # a read-modify-write: its elements are read and written
            record("load", ptr, mask)
            record("store", ptr, mask)
        state["depth"] += 1
        try:
            return orig_rmw(self, rmwOp, ptr, val, mask, *a, **kw)
        finally:
            state["depth"] -= 1

    def hooked_call(self, *args_dev, **kw):
        names = list(self.arg_names)
        bound = dict(zip(names, args_dev))
        bound.update(kw)
        ranges = []
        for name, t in bound.items():
            if hasattr(t, "untyped_storage"):
                st = t.untyped_storage()
                ranges.append((st.data_ptr(), st.data_ptr() + st.nbytes(), name))
        ranges.sort()
        state["ranges"] = (np.array([r[0] for r in ranges], dtype=np.uint64),
                           [r[1] for r in ranges], [r[2] for r in ranges])
        launch = {"name": getattr(self.fn, "__name__", "?"), "loads": {}, "stores": {}}
        state["launch"] = launch
        counts.launches.append(launch)
        try:
            return orig_call(self, *args_dev, **kw)
        finally:
            state["launch"] = None

    try:
        Builder.create_masked_load = wrap("create_masked_load", "load", 1, False)
        Builder.create_masked_store = wrap("create_masked_store", "store", 2, False)
        Builder.create_load = wrap("create_load", "load", 0, True)
        Builder.create_store = wrap("create_store", "store", 0, True)
        if orig_rmw is not None:
            Builder.create_atomic_rmw = hooked_rmw
        Grid.__call__ = hooked_call
        counts.result = kernel_call(*args, **kwargs)
    finally:
        for name, fn in orig.items():
            setattr(Builder, name, fn)
        if orig_rmw is not None:
            Builder.create_atomic_rmw = orig_rmw
        Grid.__call__ = orig_call
    return counts


# --- running a kernel by name ------------------------------------------------------------------------------

def make_inputs(kernel: str, n: int, d: int, dtype="fp16", batch: int = 1, heads: int = 1, device=None, seed=0):
    """Random (never zero) inputs for ``kernel`` as :mod:`flashsim.model.kernel_io` describes its shapes."""
    import torch
    from flashsim.model.dtypes import canonical_dtype
    from flashsim import kernels
    tdt = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[canonical_dtype(dtype)]
    device = device or ("cpu" if kernels.INTERPRETER else "cuda")
    g = torch.Generator(device="cpu").manual_seed(seed)

    def rnd(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float32).to(device=device, dtype=tdt)

    if kernel in ("flash_fwd", "flash_bwd", "naive"):
        return [rnd(batch, heads, n, d) for _ in range(3)] + ([rnd(batch, heads, n, d)] if kernel == "flash_bwd"
                                                              else [])
    if kernel == "tiled_matmul":
        return [rnd(n, d), rnd(d, n)]
    if kernel == "online_softmax":
        return [rnd(n, n)]
    raise FlashsimError(f"unknown kernel {kernel!r}: use one of {list(KERNELS)}")


def kernel_runner(kernel: str, n: int, d: int, block_m: int, block_n: int, causal: bool = False, dtype="fp16",
                  batch: int = 1, heads: int = 1, block_k: int = 32, tma: bool = False):
    """A zero-argument callable that launches ``kernel`` once on fixed random inputs (prepared now).

    ``tma`` (flash_fwd, flash_bwd): load through tensor descriptors. Off by default: the kernel view models the
    pointer loads, which ncu's global-load counters see; TMA copies bypass those counters (same DRAM bytes)."""
    from flashsim import kernels as K
    inputs = make_inputs(kernel, n, d, dtype, batch, heads)
    if kernel == "flash_fwd":
        q, k, v = inputs
        return lambda: K.flash_forward(q, k, v, causal=causal, block_m=block_m, block_n=block_n, tma=tma)
    if kernel == "flash_bwd":
        q, k, v, do = inputs
        o, lse = K.flash_forward(q, k, v, causal=causal, block_m=block_m, block_n=block_n)
        return lambda: K.flash_backward(q, k, v, o, lse, do, causal=causal, block_m=block_m, block_n=block_n,
                                        tma=tma)
    if kernel == "naive":
        q, k, v = inputs
        return lambda: K.naive_attention(q, k, v, causal=causal, block_m=block_m, block_n=block_n)
    if kernel == "tiled_matmul":
        a, b = inputs
        return lambda: K.tiled_matmul(a, b, block_m=block_m, block_n=block_n, block_k=block_k, causal=causal)
    if kernel == "online_softmax":
        (x,) = inputs
        return lambda: K.online_softmax(x, causal=causal, block_m=block_m, block_n=block_n)
    raise FlashsimError(f"unknown kernel {kernel!r}: use one of {list(KERNELS)}")


#: Triton kernel function names per CLI kernel (for ncu's --kernel-name filter) and launches per call.
KERNEL_FUNCTIONS = {
    "flash_fwd": ["_flash_fwd_kernel"],
    "flash_bwd": ["_bwd_preprocess", "_bwd_dkdv", "_bwd_dq"],
    "naive": ["_scores_kernel", "_softmax_kernel", "_pv_kernel"],
    "tiled_matmul": ["_matmul_kernel"],
    "online_softmax": ["_online_softmax_kernel"],
}

# --- bench and ncu -----------------------------------------------------------------------------------------


def bench(fn, warmup: int = 25, rep: int = 100) -> float:
    """Median milliseconds of ``fn()``: ``triton.testing.do_bench`` on a GPU, wall clock in the interpreter."""
    from flashsim import kernels
    if not kernels.INTERPRETER:
        import triton.testing
        return float(triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


NCU_METRICS = ["dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum",
               "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum",
               "gpu__time_duration.sum",
               # cp.async (LDGSTS) loads bypass the op_ld counter; L2 traffic from the SMs, reads and writes:
               "l1tex__t_bytes_pipe_lsu_mem_global_op_ldgsts.sum",
               "lts__t_sectors_srcunit_tex_op_read.sum", "lts__t_sectors_srcunit_tex_op_write.sum"]
#: occupancy facts of each launch (what the L2 model's programs_per_sm stands for)
LAUNCH_METRICS = ["launch__registers_per_thread", "launch__shared_mem_per_block_dynamic",
                  "launch__shared_mem_per_block_static", "launch__occupancy_limit_registers",
                  "launch__occupancy_limit_shared_mem", "launch__block_size", "launch__grid_size"]


_UNIT_SCALE = {"byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12, "KB": 1e3, "MB": 1e6,
               "GB": 1e9, "nsecond": 1.0, "usecond": 1e3, "msecond": 1e6, "second": 1e9, "ns": 1.0, "us": 1e3,
               "ms": 1e6}


def _parse_ncu_csv(text: str) -> list[dict]:
    """Rows of ``ncu --csv --print-units base`` as [{"kernel", "id", metric: value, ...}] (one per launch)."""
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        return []
    kernels: dict = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        try:
            kid = int(row["ID"])
        except (KeyError, ValueError):
            continue
        e = kernels.setdefault(kid, {"id": kid, "kernel": row.get("Kernel Name", "?")})
        val = (row.get("Metric Value") or "").replace(",", "")
        try:
            e[row["Metric Name"]] = float(val) * _UNIT_SCALE.get((row.get("Metric Unit") or "").strip(), 1.0)
        except ValueError:
            e[row["Metric Name"]] = val
    return [kernels[k] for k in sorted(kernels)]


REQUIRED_METRICS = NCU_METRICS[:6]


def _setup_launches(kernel: str) -> list:
    """Launches kernel_runner makes while preparing inputs (flash_bwd runs the forward pass first)."""
    return ["_flash_fwd_kernel"] if kernel == "flash_bwd" else []


def _find_ncu(ncu=None):
    return ncu or shutil.which("ncu") or next((p for p in ("/usr/local/cuda/bin/ncu",) if os.path.exists(p)), None)


def _launch_record(r: dict) -> dict:
    def g(k):       # ncu prints "n/a" for a metric a kernel does not have: count it as 0
        try:
            return float(r.get(k, 0) or 0)
        except (TypeError, ValueError):
            return 0.0
    return {
        "kernel": r["kernel"],
        "dram_read_bytes": g("dram__bytes_read.sum"), "dram_write_bytes": g("dram__bytes_write.sum"),
        "l2_bytes": g("lts__t_bytes.sum"),
        "global_load_bytes": g("l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum")
        + g("l1tex__t_bytes_pipe_lsu_mem_global_op_ldgsts.sum"),
        "global_store_bytes": g("l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum"),
        "l2_read_bytes_from_sm": 32 * g("lts__t_sectors_srcunit_tex_op_read.sum"),
        "l2_write_bytes_from_sm": 32 * g("lts__t_sectors_srcunit_tex_op_write.sum"),
        "duration_ns": g("gpu__time_duration.sum"),
        "raw": {k: v for k, v in r.items() if k not in ("id", "kernel")},
    }


def ncu_profile_batch(configs: list, ncu: str | None = None, timeout: float = 480.0, warmup: int = 0) -> list:
    """Profile several kernel calls in ONE ncu run (one child process): a list of results like ncu_profile's.

    ``configs``: dicts with kwargs of :func:`kernel_runner` (kernel, n, d, block_m, block_n, causal, dtype,
    batch, heads). Each config is called ``warmup + 1`` times; only its last call is kept. Raises FlashsimError
    (with ncu's message) when ncu is missing or cannot read counters; :func:`ncu_profile` falls back instead.
    """
    exe = _find_ncu(ncu)
    if exe is None:
        raise FlashsimError("Nsight Compute (ncu) not found on PATH")
    names = sorted({n for c in configs for n in KERNEL_FUNCTIONS[c["kernel"]] + _setup_launches(c["kernel"])})
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                                    env.get("PYTHONPATH", "")] if p)
    spec = json.dumps({"configs": configs, "warmup": warmup})
    last_err = ""
    for metrics, units in ((NCU_METRICS + LAUNCH_METRICS, True), (NCU_METRICS, True), (REQUIRED_METRICS, True),
                           (REQUIRED_METRICS, False)):
        cmd = [exe, "--csv", "--clock-control", "none", "--kernel-name", "regex:^(" + "|".join(names) + ")$",
               "--metrics", ",".join(metrics)] + (["--print-units", "base"] if units else []) + \
              [sys.executable, "-m", "flashsim.measure", "--child", spec]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        text = proc.stdout + "\n" + proc.stderr
        if "ERR_NVGPUCTRPERM" in text:
            raise FlashsimError("no permission to read GPU counters (ERR_NVGPUCTRPERM)")
        rows = _parse_ncu_csv(proc.stdout)
        if rows:
            break
        last_err = f"ncu exit {proc.returncode}: {text.strip()[-1500:]}"
    else:
        raise FlashsimError(f"ncu returned no metrics: {last_err}")
    # assign launches to configs in order: [setup launches] + [measured launches] per config per call
    out, pos = [], 0
    for c in configs:
        setup = _setup_launches(c["kernel"])
        meas = KERNEL_FUNCTIONS[c["kernel"]]
        seq = setup + meas * (warmup + 1)
        got = rows[pos:pos + len(seq)]
        pos += len(seq)
        if [r["kernel"] for r in got] != seq:
            raise FlashsimError(f"ncu launches out of step at {c}: expected {seq}, got {[r['kernel'] for r in got]}")
        launches = [_launch_record(r) for r in got[-len(meas):]]
        keys = [k for k in launches[0] if k not in ("kernel", "raw")]
        out.append({"backend": "ncu", "config": c, "launches": launches,
                    "total": {k: sum(L[k] for L in launches) for k in keys}})
    return out


def ncu_profile(kernel: str, n: int, d: int, block_m: int, block_n: int, causal: bool = False, dtype="fp16",
                batch: int = 1, heads: int = 1, warmup: int = 1, block_k: int = 32, ncu: str | None = None,
                timeout: float = 300.0) -> dict:
    """Profile one call of ``kernel`` under Nsight Compute, after ``warmup`` calls (skipped in the results).

    Runs ``ncu --csv --clock-control none --kernel-name regex:... --metrics ...`` on a child
    ``python -m flashsim.measure --child`` process and keeps the last call's launches. Returns {"backend": "ncu",
    "launches": [{"kernel", "dram_read_bytes", "dram_write_bytes", "l2_bytes", "global_load_bytes",
    "global_store_bytes", "duration_ns", ...}], "total": {...}}. When ncu is missing or may not read the
    counters, prints one line saying so and returns {"backend": "timing", ...} from :func:`timing_estimate`.
    """
    if _find_ncu(ncu) is None:
        print("ncu_profile: Nsight Compute (ncu) not found on PATH; falling back to a timing-based estimate")
        return timing_estimate(kernel, n, d, block_m, block_n, causal, dtype, batch, heads, block_k)
    cfg = dict(kernel=kernel, n=n, d=d, block_m=block_m, block_n=block_n, causal=causal, dtype=str(dtype),
               batch=batch, heads=heads, block_k=block_k)
    try:
        return ncu_profile_batch([cfg], ncu=ncu, timeout=timeout, warmup=warmup)[0]
    except FlashsimError as exc:
        if "ERR_NVGPUCTRPERM" not in str(exc):
            raise
        print("ncu_profile: no permission to read GPU counters (ERR_NVGPUCTRPERM); falling back to a timing-based "
              "estimate")
        return timing_estimate(kernel, n, d, block_m, block_n, causal, dtype, batch, heads, block_k)


def timing_estimate(kernel, n, d, block_m, block_n, causal=False, dtype="fp16", batch=1, heads=1, block_k=32,
                    hardware="h200") -> dict:
    """Fallback without counters: bytes simulated ÷ measured time, against the preset's DRAM bandwidth."""
    from flashsim.model.hardware import get_device
    hw = get_device(hardware)
    ms = bench(kernel_runner(kernel, n, d, block_m, block_n, causal, dtype, batch, heads, block_k))
    dram = kernel_dram(kernel, n, d, block_m, block_n, causal, dtype, batch, heads, block_k, hardware)["total"]
    achieved = dram.dram_bytes / (ms * 1e-3)
    return {"backend": "timing", "duration_ms": ms, "simulated_dram_bytes": dram.dram_bytes,
            "implied_bandwidth_bytes_per_s": achieved,
            "fraction_of_peak_bandwidth": achieved / hw.hbm_bandwidth_bytes_per_s}


def _child(spec_json: str) -> None:
    """Entry point of the ncu child process: each config's calls in order (see :func:`ncu_profile_batch`)."""
    import torch
    spec = json.loads(spec_json)
    for cfg in spec["configs"]:
        fn = kernel_runner(**cfg)
        for _ in range(spec.get("warmup", 0) + 1):
            fn()
        torch.cuda.synchronize()
        del fn
        torch.cuda.empty_cache()


# --- the CLI -------------------------------------------------------------------------------------------------

def measure_cli_result(kernel: str, n: int, d: int, block_m: int, block_n: int, causal: bool = False, dtype="fp16",
                       batch: int = 1, heads: int = 1, hardware: str = "h200") -> dict:
    """The JSON object ``flashsim measure`` prints: measured and simulated bytes of one kernel call.

    Interpreter: backend "interpreter", bytes from :func:`count_io`. GPU: backend "ncu" (or "timing" when
    counters cannot be read), with measured_dram_bytes and simulated_dram_bytes too.
    """
    from flashsim import kernels
    from flashsim.model.dtypes import canonical_dtype
    if kernel not in KERNELS:
        raise FlashsimError(f"unknown kernel {kernel!r}: use one of {list(KERNELS)}")
    dtype = canonical_dtype(dtype)
    sim = kernel_io(kernel, n, d, block_m, block_n, causal, dtype, batch, heads)
    out = {"kernel": kernel, "n": n, "d": d, "block_m": block_m, "block_n": block_n, "causal": bool(causal),
           "dtype": dtype, "batch": batch, "heads": heads,
           "simulated_load_bytes": sim.load_bytes, "simulated_store_bytes": sim.store_bytes}
    if kernels.INTERPRETER:
        fn = kernel_runner(kernel, n, d, block_m, block_n, causal, dtype, batch, heads)
        c = count_io(fn)
        out.update(backend="interpreter", measured_load_bytes=c.load_bytes, measured_store_bytes=c.store_bytes,
                   match=(c.load_bytes == sim.load_bytes and c.store_bytes == sim.store_bytes))
        return out
    dram = kernel_dram(kernel, n, d, block_m, block_n, causal, dtype, batch, heads, hardware=hardware)["total"]
    out["simulated_dram_bytes"] = dram.dram_bytes
    prof = ncu_profile(kernel, n, d, block_m, block_n, causal, dtype, batch, heads)
    out["backend"] = prof["backend"]
    if prof["backend"] == "ncu":
        t = prof["total"]
        out.update(measured_load_bytes=int(t["global_load_bytes"]), measured_store_bytes=int(t["global_store_bytes"]),
                   measured_l2_bytes=int(t["l2_bytes"]),
                   measured_dram_bytes=int(t["dram_read_bytes"] + t["dram_write_bytes"]),
                   duration_ns=t["duration_ns"])
    else:
        out.update(measured_load_bytes=None, measured_store_bytes=None, measured_dram_bytes=None,
                   duration_ms=prof["duration_ms"],
                   implied_bandwidth_bytes_per_s=prof["implied_bandwidth_bytes_per_s"])
    return out


def add_measure_arguments(parser) -> None:
    """Add the ``flashsim measure`` options to an argparse (sub)parser."""
    parser.add_argument("--kernel", required=True, choices=list(KERNELS), help="which Triton kernel to run")
    parser.add_argument("--n", type=int, required=True, help="sequence length N")
    parser.add_argument("--d", type=int, required=True, help="head dim d (tiled_matmul: inner dim)")
    parser.add_argument("--block-m", type=int, default=32, help="BLOCK_M (power of two >= 16)")
    parser.add_argument("--block-n", type=int, default=32, help="BLOCK_N (power of two >= 16)")
    parser.add_argument("--causal", action="store_true", help="causal mask")
    parser.add_argument("--dtype", default="fp16", help="fp16 (default), fp32; bf16 on a GPU only")
    parser.add_argument("--batch", type=int, default=1, help="batch size B (attention kernels)")
    parser.add_argument("--heads", type=int, default=1, help="heads H (attention kernels)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run_measure(args) -> int:
    """Run ``flashsim measure`` for parsed ``args``; print JSON (``--json``) or a short table. Returns 0."""
    res = measure_cli_result(args.kernel, args.n, args.d, args.block_m, args.block_n, args.causal, args.dtype,
                             batch=getattr(args, "batch", 1), heads=getattr(args, "heads", 1))
    if getattr(args, "json", False):
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k:>24}: {v}")
    return 0
