"""The ``flashsim measure`` command: one kernel call's measured bytes next to the simulated ones."""
from __future__ import annotations

import json

from flashsim.errors import FlashsimError
from flashsim.kernels.runtime import interpreting, select_backend
from flashsim.measure.device import simulated_hardware
from flashsim.measure.interp import count_io
from flashsim.measure.ncu import ncu_profile
from flashsim.measure.runners import kernel_runner
from flashsim.model.dtypes import canonical_dtype
from flashsim.model.kernel_io import KERNELS, kernel_dram, kernel_io
from flashsim.model.units import format_bytes, format_seconds


def measure_cli_result(kernel: str, n: int, d: int, block_m: int, block_n: int, causal: bool = False, dtype="fp16",
                       batch: int = 1, heads: int = 1, hardware=None) -> dict:
    """The JSON object ``flashsim measure`` prints: measured and simulated bytes of one kernel call.

    Interpreter: backend "interpreter", bytes from :func:`count_io`, against the view's element bytes. GPU: backend
    "ncu" (or "timing" when counters cannot be read), against the view's L1 bytes (``simulated_element_*`` keep the
    element bytes), with measured_dram_bytes and simulated_dram_bytes too, simulated for ``hardware``
    (a preset name or Hardware; None = the GPU this runs on: :func:`flashsim.measure.device.simulated_hardware`).
    """
    if kernel not in KERNELS:
        raise FlashsimError(f"unknown kernel {kernel!r}: use one of {list(KERNELS)}")
    dtype = canonical_dtype(dtype)
    sim = kernel_io(kernel, n, d, block_m, block_n, causal, dtype, batch, heads)
    out = {"kernel": kernel, "n": n, "d": d, "block_m": block_m, "block_n": block_n, "causal": bool(causal),
           "dtype": dtype, "batch": batch, "heads": heads,
           "simulated_load_bytes": sim.load_bytes, "simulated_store_bytes": sim.store_bytes}
    if interpreting():
        fn = kernel_runner(kernel, n, d, block_m, block_n, causal, dtype, batch, heads)
        c = count_io(fn)
        out.update(backend="interpreter", measured_load_bytes=c.load_bytes, measured_store_bytes=c.store_bytes,
                   match=(c.load_bytes == sim.load_bytes and c.store_bytes == sim.store_bytes))
        return out
    hw = simulated_hardware(hardware)
    dram = kernel_dram(kernel, n, d, block_m, block_n, causal, dtype, batch, heads, hardware=hw)["total"]
    out.update(simulated_dram_bytes=dram.dram_bytes, hardware=hw.name)
    prof = ncu_profile(kernel, n, d, block_m, block_n, causal, dtype, batch, heads, hardware=hw)
    out["backend"] = prof["backend"]
    if prof["backend"] == "ncu":
        # ncu counts what the L1 serves (32-byte sectors per warp instruction), so the prediction it is compared
        # with is the view's L1 bytes; the source's element bytes stay alongside (equal when rows are aligned)
        t = prof["total"]
        out.update(simulated_element_load_bytes=sim.load_bytes, simulated_element_store_bytes=sim.store_bytes,
                   simulated_load_bytes=sim.l1_load_bytes, simulated_store_bytes=sim.l1_store_bytes)
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
    parser.add_argument("--block-m", "--block-r", dest="block_m", type=int, default=32,
                        help="BLOCK_M = Br, rows of Q per program (power of two >= 16, default 32)")
    parser.add_argument("--block-n", "--block-c", dest="block_n", type=int, default=32,
                        help="BLOCK_N = Bc, rows of K/V per inner step (power of two >= 16, default 32)")
    parser.add_argument("--causal", action="store_true", help="causal mask")
    parser.add_argument("--dtype", default="fp16", help="fp16 (default), fp32; bf16 on a GPU only")
    parser.add_argument("--batch", type=int, default=1, help="batch size B (attention kernels)")
    parser.add_argument("--heads", type=int, default=1, help="heads H per sequence (attention kernels); B × H "
                        "heads run, as `flashsim traffic --batch B --heads H` counts")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run_measure(args) -> int:
    """Run ``flashsim measure`` for parsed ``args``; print JSON (``--json``) or a short table. Returns 0.

    The backend is chosen explicitly here (the GPU where torch sees one, else the interpreter), so the kernels do
    not print their "nobody chose" line: the result names the backend itself."""
    select_backend()
    res = measure_cli_result(args.kernel, args.n, args.d, args.block_m, args.block_n, args.causal, args.dtype,
                             batch=getattr(args, "batch", 1), heads=getattr(args, "heads", 1))
    if getattr(args, "json", False):
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k:>24}: {_readable(k, v)}")
    return 0


def _readable(key: str, value) -> str:
    """Bytes in binary units with the exact count, times in s/ms/µs/ns (the JSON keeps the raw numbers)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if key.endswith("_bytes"):
            return f"{format_bytes(value)} ({int(value):,} B)" if value >= 1024 else f"{int(value)} B"
        if key.endswith("_bytes_per_s"):
            return f"{format_bytes(value)}/s"
        for suffix, scale in (("_ns", 1e-9), ("_ms", 1e-3), ("_s", 1.0)):
            if key.endswith(suffix):
                return format_seconds(value * scale)
    return str(value)
