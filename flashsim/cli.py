"""The ``flashsim`` command (also ``python -m flashsim``): count, simulate, reproduce the paper, measure.

::

    flashsim traffic  --algo flash2 --n 4096 --d 64 [--block-r 128 --block-c 128] [--json]
    flashsim simulate --algo flash1 --n 256 --d 64 --dtype fp16 --check      # exit 1 if the error is too big
    flashsim paper                                                           # FA1 Fig. 2, next to the paper
    flashsim measure  --kernel flash_fwd --n 1024 --d 64                     # Triton kernels (needs torch)

``traffic`` and ``simulate`` take the options of :func:`flashsim.traffic` spelled ``--n --d --block-r --block-c
--heads --dtype --causal --backward --device --sram-bytes --algo`` (plus ``--stats-dtype --dropout-p --eager-ops
--l2``); ``--json`` prints one JSON object whose keys are the fields of :class:`flashsim.model.simulator.Traffic`.

Bad input prints ``error: ...`` (the message names the fix) and exits with status 2, never a traceback.
"""
from __future__ import annotations

import argparse
import json
import sys

from flashsim.errors import FlashsimError

ALGOS = ("naive", "eager", "flash1", "flash2")


def _add_problem_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--algo", default="flash2", help="naive | eager | flash1 | flash2 (default flash2)")
    p.add_argument("--n", type=int, required=True, help="sequence length N")
    p.add_argument("--d", type=int, required=True, help="head dimension d")
    p.add_argument("--block-r", type=int, default=None, help="rows of Q per block, Br (default: from SRAM)")
    p.add_argument("--block-c", type=int, default=None, help="rows of K/V per block, Bc (default: from SRAM)")
    p.add_argument("--heads", type=int, default=1, help="independent heads (batch × heads), default 1")
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
    return dict(block_r=args.block_r, block_c=args.block_c, heads=args.heads, dtype=args.dtype,
                causal=args.causal, backward=args.backward, device=args.device, sram_bytes=args.sram_bytes,
                stats_dtype=args.stats_dtype, dropout_p=args.dropout_p, l2=args.l2, eager_ops=args.eager_ops)


def _gb(x) -> str:
    return f"{x / 1e9:.4g} GB" if x >= 1e8 else f"{x / 1e6:.4g} MB" if x >= 1e5 else f"{x} B"


def _print_traffic(t) -> None:
    rows = [
        ("algo", f"{t.algo}" + (f" ({t.eager_ops})" if t.eager_ops else "")),
        ("problem", f"N={t.n} d={t.d} heads={t.heads} {t.dtype} (stats {t.stats_dtype})"
                    + (" causal" if t.causal else "") + (" fwd+bwd" if t.backward else " fwd")
                    + (f" dropout={t.dropout_p}" if t.dropout_p else "")),
        ("device", f"{t.device}, SRAM {t.sram_bytes} B"),
        ("blocks", f"Br={t.block_r} Bc={t.block_c}"),
        ("HBM read", f"{t.hbm_read_bytes} B ({_gb(t.hbm_read_bytes)})"),
        ("HBM write", f"{t.hbm_write_bytes} B ({_gb(t.hbm_write_bytes)})"),
        ("HBM total", f"{t.hbm_bytes} B ({_gb(t.hbm_bytes)})"),
    ]
    if t.init_write_bytes:
        rows.append(("init (memset)", f"{t.init_write_bytes} B, not in HBM write"))
    if t.l2:
        rows.append(("DRAM (L2 model)", f"read {_gb(t.dram_read_bytes)}, write {_gb(t.dram_write_bytes)}, "
                                         f"total {_gb(t.dram_bytes)}"))
    rows += [
        ("FLOPs", f"{t.flops:.4g}"),
        ("SRAM peak", f"{t.sram_peak_bytes} B"),
        ("intensity", f"{t.arithmetic_intensity:.4g} FLOP/B (ridge {t.ridge_point_flops_per_byte:.4g})"),
        ("roofline time", f"{t.time_s * 1e3:.4g} ms, {t.bound}-bound"),
    ]
    for k, v in rows:
        print(f"{k:>16}: {v}")
    print(f"{'read by tensor':>16}: " + ", ".join(f"{k} {_gb(v)}" for k, v in t.read_bytes_by_tensor.items()))
    print(f"{'write by tensor':>16}: " + ", ".join(f"{k} {_gb(v)}" for k, v in t.write_bytes_by_tensor.items()))


def _cmd_traffic(args) -> int:
    from flashsim.model.simulator import traffic
    t = traffic(args.algo, args.n, args.d, **_kwargs(args))
    if args.json:
        print(json.dumps(t.as_dict()))
    else:
        _print_traffic(t)
    return 0


def _cmd_simulate(args) -> int:
    from flashsim.model.simulator import simulate
    sim = simulate(args.algo, args.n, args.d, seed=args.seed, record_events=False, **_kwargs(args))
    if args.json:
        print(json.dumps(sim.as_dict()))
    else:
        _print_traffic(sim.traffic)
        for name, e in sim.errors_by_output.items():
            print(f"{'error ' + name:>16}: {e['rel_error']:.3g} relative (max abs {e['max_abs_error']:.3g}); "
                  f"plain {sim.traffic.dtype}: {e['plain_rel_error']:.3g}")
        print(f"{'check':>16}: {'ok' if sim.ok else 'FAILED'} (tolerance {sim.tolerance:.3g}; exact in real "
              "arithmetic, not bitwise)")
        if sim.note:
            print(f"{'note':>16}: {sim.note}")
    if args.check and not sim.ok:
        print(f"error: simulate error {sim.rel_error:.3g} exceeds the {sim.traffic.dtype} tolerance "
              f"{sim.tolerance:.3g}", file=sys.stderr)
        return 1
    return 0


def _cmd_paper(args) -> int:
    from flashsim.model.paper import fig2_left, fig2_middle, format_report
    if args.json:
        print(json.dumps({"fig2_middle": fig2_middle(), "fig2_left": fig2_left(l2=not args.no_l2)}))
    else:
        print(format_report(l2=not args.no_l2))
    return 0


def _cmd_measure(args) -> int:
    from flashsim.measure import run_measure
    return int(run_measure(args) or 0)


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
    p.add_argument("--seed", type=int, default=0, help="random seed of the inputs")
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
    """Entry point of ``flashsim``: returns the exit status (0 ok, 1 check failed, 2 bad input)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        parser = build_parser(with_measure=argv[:1] == ["measure"])
        args, unknown = parser.parse_known_args(argv)
        if unknown and args.func is not _cmd_measure_missing:
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
        return args.func(args)
    except FlashsimError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
