"""The ``flashsim`` command (also ``python -m flashsim``): count, simulate, reproduce the paper, measure.

::

    flashsim traffic  --algo flash2 --n 4096 --d 64 [--block-r 128 --block-c 128] [--json]
    flashsim simulate --algo flash1 --n 256 --d 64 --dtype fp16 --check      # exit 1 if the error is too big
    flashsim paper                                                           # FA1 Fig. 2, next to the paper
    flashsim measure  --kernel flash_fwd --n 1024 --d 64 [--block-r 64 --block-c 32]   # needs torch

``traffic`` and ``simulate`` take the options of :func:`flashsim.traffic` spelled ``--n --d --block-r --block-c
--batch --heads --dtype --causal --backward --device --sram-bytes --algo`` (plus ``--stats-dtype --dropout-p
--eager-ops --l2``); ``--json`` prints one JSON object whose keys are the fields of
:class:`flashsim.model.simulator.Traffic`.

One vocabulary in every command: ``--block-r``/``--block-c`` (the papers' Br, Bc) and their aliases
``--block-m``/``--block-n`` (the kernels' BLOCK_M, BLOCK_N) name the same two blocks; ``--batch B --heads H``
means B sequences of H heads each, B × H independent heads, in every command and in the Python API
(:func:`flashsim.traffic`'s ``batch`` and ``heads``, the JSON's ``batch`` and ``heads`` fields). Bytes print in
binary units (B, KiB, MiB, GiB) and times in s, ms, µs.

Bad input prints ``error: ...`` (the message names the fix) and exits with status 2, never a traceback: argparse
errors, :class:`~flashsim.errors.FlashsimError`, sizes whose memory would exceed the budget (refused before
anything is allocated) and a host out of memory all end that way. ``--json`` prints strict JSON (no ``NaN`` or
``Infinity``). A closed pipe (``flashsim traffic ... --json | head -c 10``) ends quietly. Anything else is a bug:
it prints ``error: internal error ...`` (the traceback only with ``FLASHSIM_TRACEBACK=1``) and exits 1.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

from flashsim.errors import FlashsimError, MemoryBudgetError
from flashsim.model.dtypes import dtype_bytes
from flashsim.model.memory import DEFAULT_HOST_BUDGET_BYTES
from flashsim.model.paper import fig2_left, fig2_middle, format_report
from flashsim.model.simulator import simulate, traffic
from flashsim.model.units import format_bytes, format_seconds

ALGOS = ("naive", "eager", "flash1", "flash2")


def _seed(text: str) -> int:
    """argparse type of --seed: an integer ≥ 0 (numpy's generators take no negative seed)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid seed {text!r}: use an integer ≥ 0, e.g. --seed 0") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"seed {value} is negative: use an integer ≥ 0, e.g. --seed 0")
    return value


def _add_problem_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--algo", default="flash2", help="naive | eager | flash1 | flash2 (default flash2)")
    p.add_argument("--n", type=int, required=True, help="sequence length N")
    p.add_argument("--d", type=int, required=True, help="head dimension d")
    p.add_argument("--block-r", "--block-m", dest="block_r", type=int, default=None,
                   help="rows of Q per block, Br = BLOCK_M (default: the algorithm's rule, from SRAM)")
    p.add_argument("--block-c", "--block-n", dest="block_c", type=int, default=None,
                   help="rows of K/V per block, Bc = BLOCK_N (default: the algorithm's rule, from SRAM)")
    p.add_argument("--batch", type=int, default=1, help="sequences B, default 1 (B × H heads are counted)")
    p.add_argument("--heads", type=int, default=1, help="heads H per sequence, default 1 (as in measure and "
                   "flashsim.traffic)")
    p.add_argument("--dtype", default="fp16", help="storage dtype: fp16 (default), bf16, fp32")
    p.add_argument("--stats-dtype", default=None, help="dtype of m, l, logsumexp (default fp32)")
    p.add_argument("--causal", action="store_true", help="causal mask (skip fully masked tiles)")
    p.add_argument("--backward", action="store_true", help="count forward + backward")
    p.add_argument("--dropout-p", type=float, default=0.0, help="dropout probability (eager; flash: no bytes)")
    p.add_argument("--eager-ops", default=None, help="eager preset: pytorch (default) or megatron2020")
    p.add_argument("--device", default="h200", help="a100 | h100 | h200 (default) | rtx4090 | t4 | cpu")
    p.add_argument("--sram-bytes", type=int, default=None, help="override the device's SRAM per SM (bytes)")
    p.add_argument("--l2", action="store_true", help="also run the L2 model: bytes that reach DRAM")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _kwargs(args) -> dict:
    for name in ("batch", "heads"):
        value = getattr(args, name)
        if value < 1:
            raise FlashsimError(f"--{name} {value}: must be a positive integer, e.g. --{name} 1")
    return dict(block_r=args.block_r, block_c=args.block_c, batch=args.batch, heads=args.heads, dtype=args.dtype,
                causal=args.causal, backward=args.backward, device=args.device, sram_bytes=args.sram_bytes,
                stats_dtype=args.stats_dtype, dropout_p=args.dropout_p, l2=args.l2, eager_ops=args.eager_ops)


def _bytes(x: int) -> str:
    """Readable and exact: "4.13 MiB (4,325,376 B)"."""
    return f"{format_bytes(x)} ({x:,} B)" if x >= 1024 else f"{x} B"


def _print_traffic(t) -> None:
    rows = [
        ("algo", f"{t.algo}" + (f" ({t.eager_ops})" if t.eager_ops else "")),
        ("problem", f"N={t.n} d={t.d} batch={t.batch} heads={t.heads} {t.dtype} (stats {t.stats_dtype})"
                    + (" causal" if t.causal else "") + (" fwd+bwd" if t.backward else " fwd")
                    + (f" dropout={t.dropout_p}" if t.dropout_p else "")),
        ("device", f"{t.device}, SRAM {format_bytes(t.sram_bytes)}"),
        ("blocks", f"Br={t.block_r} Bc={t.block_c}"),
        ("HBM read", _bytes(t.hbm_read_bytes)),
        ("HBM write", _bytes(t.hbm_write_bytes)),
        ("HBM total", _bytes(t.hbm_bytes)),
    ]
    if t.init_write_bytes:
        rows.append(("init (memset)", f"{_bytes(t.init_write_bytes)}, not in HBM write"))
    if t.l2:
        rows.append(("DRAM (L2 model)", f"read {format_bytes(t.dram_read_bytes)}, write "
                                         f"{format_bytes(t.dram_write_bytes)}, total {format_bytes(t.dram_bytes)}"))
    rows += [
        ("FLOPs", f"{t.flops:.4g}"),
        ("SRAM peak", format_bytes(t.sram_peak_bytes)),
        ("intensity", f"{t.arithmetic_intensity:.4g} FLOP/B (ridge {t.ridge_point_flops_per_byte:.4g})"),
        ("roofline time", f"{format_seconds(t.time_s)}, {t.bound}-bound"),
    ]
    for k, v in rows:
        print(f"{k:>16}: {v}")
    print(f"{'read by tensor':>16}: " + ", ".join(f"{k} {format_bytes(v)}" for k, v in t.read_bytes_by_tensor.items()))
    print(f"{'write by tensor':>16}: " + ", ".join(f"{k} {format_bytes(v)}" for k, v in t.write_bytes_by_tensor.items()))


def _cmd_traffic(args) -> int:
    t = traffic(args.algo, args.n, args.d, **_kwargs(args))
    if args.json:
        _print_json(t.as_dict())
    else:
        _print_traffic(t)
    return 0


def _print_json(obj: dict) -> None:
    """One strict JSON object (a NaN or an infinity raises here instead of printing ``NaN``/``Infinity``)."""
    print(json.dumps(obj, allow_nan=False))


def _cmd_simulate(args) -> int:
    sim = simulate(args.algo, args.n, args.d, seed=args.seed, record_events=False, **_kwargs(args))
    if args.json:
        _print_json(sim.as_dict())
    else:
        _print_traffic(sim.traffic)
        for name, e in sim.errors_by_output.items():
            print(f"{'error ' + name:>16}: {e['rel_error']:.3g} relative (max abs {e['max_abs_error']:.3g}); "
                  f"plain {sim.traffic.dtype}: {e['plain_rel_error']:.3g}; tolerance {e['tolerance']:.3g}")
        print(f"{'check':>16}: {'ok' if sim.ok else 'FAILED'} (exact in real arithmetic, not bitwise)")
        if sim.note:
            print(f"{'note':>16}: {sim.note}")
    if args.check and not sim.ok:
        bad = [f"{name} error {e['rel_error']:.3g} exceeds its tolerance {e['tolerance']:.3g}"
               for name, e in sim.errors_by_output.items() if not e["ok"]]
        print(f"error: simulate check failed ({sim.traffic.dtype}): " + "; ".join(bad + ([sim.note] if sim.note
                                                                                     else [])), file=sys.stderr)
        return 1
    return 0


def _cmd_paper(args) -> int:
    if args.json:
        _print_json({"fig2_middle": fig2_middle(), "fig2_left": fig2_left(l2=not args.no_l2)})
    else:
        print(format_report(l2=not args.no_l2))
    return 0


def _cmd_measure(args) -> int:
    from flashsim.measure import run_measure  # imports torch: only the measure subcommand pays for it
    _check_measure_budget(args)
    return int(run_measure(args) or 0)


def measure_footprint_bytes(kernel: str, n: int, d: int, dtype="fp16", batch: int = 1, heads: int = 1) -> int:
    """Bytes of the tensors ``flashsim measure`` allocates for one kernel call (inputs, outputs, intermediates).

    naive: Q, K, V, O (batch, heads, n, d) and S, P (batch, heads, n, n) fp32; flash_fwd: Q, K, V, O and the fp32
    logsumexp; flash_bwd: the forward's plus dO, dQ, dK, dV and the fp32 D; tiled_matmul: A (n, d), B (d, n),
    C (n, n); online_softmax: X, P (n, n) and the fp32 logsumexp. Unknown kernels count 0 (measure rejects them).
    """
    es, bh = dtype_bytes(dtype), batch * heads
    nd = bh * n * d * es
    return {"naive": 4 * nd + 2 * bh * n * n * 4,
            "flash_fwd": 4 * nd + bh * n * 4,
            "flash_bwd": 8 * nd + 2 * bh * n * 4,
            "tiled_matmul": (2 * n * d + n * n) * es,
            "online_softmax": 2 * n * n * es + n * 4}.get(kernel, 0)


def _check_measure_budget(args) -> None:
    """Refuse, before any allocation, a measure call whose tensors exceed the host budget (interpreter) or the
    GPU's free memory, so that `flashsim measure --kernel naive --n 100000` fails at once instead of after
    seconds with an out-of-memory traceback."""
    kernel, n, d = getattr(args, "kernel", None), getattr(args, "n", None), getattr(args, "d", None)
    if not isinstance(n, int) or not isinstance(d, int) or n < 1 or d < 1:
        return  # measure's own checks name the bad argument
    batch, heads = getattr(args, "batch", 1), getattr(args, "heads", 1)
    if not isinstance(batch, int) or not isinstance(heads, int) or batch < 1 or heads < 1:
        raise FlashsimError(f"--batch {batch} --heads {heads}: both must be positive integers, e.g. --batch 1")
    try:
        need = measure_footprint_bytes(kernel, n, d, getattr(args, "dtype", "fp16"), batch, heads)
    except FlashsimError:
        return  # an unknown dtype: measure says so
    budget, where = DEFAULT_HOST_BUDGET_BYTES, "host memory budget (the Triton interpreter)"
    from flashsim import kernels  # imports torch, as measure (the caller) does anyway
    if not kernels.INTERPRETER:
        import torch
        budget, where = int(0.9 * torch.cuda.mem_get_info()[0]), "free GPU memory"
    if need > budget:
        raise MemoryBudgetError(
            f"measure --kernel {kernel} at N={n}, d={d}, batch={batch}, heads={heads} needs {need / 2**30:.3g} GiB "
            f"of tensors, over the {budget / 2**30:.3g} GiB {where}: use a smaller --n (memory grows as "
            + ("N²" if kernel in ("naive", "tiled_matmul", "online_softmax") else "N")
            + "), fewer --heads/--batch, or count mode (`flashsim traffic`), which needs no tensors")


def build_parser(with_measure: bool = True) -> argparse.ArgumentParser:
    """The argparse parser. with_measure=False gives ``measure`` a placeholder, so that ``flashsim traffic`` and
    ``flashsim --help`` never import torch (flashsim.measure does)."""
    parser = argparse.ArgumentParser(prog="flashsim", description="FlashAttention on a simulated GPU memory "
                                     "hierarchy: every byte counted.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("traffic", help="count mode: HBM bytes, FLOPs, roofline time")
    _add_problem_arguments(p)
    p.set_defaults(func=_cmd_traffic)
    p = sub.add_parser("simulate", help="step mode on random inputs: error against float64")
    _add_problem_arguments(p)
    p.add_argument("--seed", type=_seed, default=0, help="random seed of the inputs (an integer ≥ 0)")
    p.add_argument("--check", action="store_true", help="exit 1 if the error exceeds the dtype's tolerance")
    p.set_defaults(func=_cmd_simulate)
    p = sub.add_parser("paper", help="FA1 Fig. 2 (left and middle) next to the paper's numbers")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--no-l2", action="store_true", help="skip the L2 model (faster)")
    p.set_defaults(func=_cmd_paper)
    p = sub.add_parser("measure", help="run a Triton kernel and count its bytes (needs torch and triton; "
                       "`flashsim measure --help` lists its options)")
    p.set_defaults(func=_cmd_measure)
    if with_measure:
        try:
            from flashsim.measure import add_measure_arguments  # imports torch: only the measure subcommand pays for it
        except ImportError:
            p.set_defaults(func=_cmd_measure_missing)
        else:
            add_measure_arguments(p)
    return parser


def _cmd_measure_missing(args) -> int:
    raise FlashsimError("`flashsim measure` needs flashsim.measure with torch and triton installed: run "
                        "`make venv` (or `pip install -e .`)")


def main(argv=None) -> int:
    """Entry point of ``flashsim``: returns the exit status (0 ok, 1 check failed or internal error, 2 bad input).

    Never raises: argparse's own errors (status 2) are returned, not raised as SystemExit.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser(with_measure=argv[:1] == ["measure"])
        args, unknown = parser.parse_known_args(argv)
        if unknown and args.func is not _cmd_measure_missing:
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe raises here, inside the try, not at interpreter exit
        return code
    except SystemExit as e:  # argparse: --help (0) or a usage error (2), already printed
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    except FlashsimError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except MemoryError:
        print("error: the host ran out of memory: use a smaller --n, fewer --heads, or count mode "
              "(`flashsim traffic`, no --l2)", file=sys.stderr)
        return 2
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 2
    except Exception as e:  # a bug: one line, not a traceback (FLASHSIM_TRACEBACK=1 shows it)
        if os.environ.get("FLASHSIM_TRACEBACK"):
            traceback.print_exc()
        print(f"error: internal error ({type(e).__name__}: {e}); please report it with the command line "
              "(FLASHSIM_TRACEBACK=1 prints the traceback)", file=sys.stderr)
        return 1


def _silence_stdout() -> None:
    """The reader closed the pipe (``| head``): point stdout at /dev/null so the flush at exit cannot raise."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a real file (a test's capture): nothing to flush later
        pass
