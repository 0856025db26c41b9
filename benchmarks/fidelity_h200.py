"""Fidelity of the kernel view and the L2 model on the H200 (issue 13): every kernel, bytes against Nsight Compute.

For each of the five Triton kernels (naive, tiled_matmul, online_softmax, flash_fwd, flash_bwd) at 12 or more
configurations, at least 4 of them not among the configurations the L2 model's settings were chosen on (the
2026-11-29 sweep, ``gpu_validate.NCU_SWEEP``; see benchmarks/results/kernels_h200_2026-11-30.json), this measures
with ncu, per launch:

- requested bytes: ``l1tex__t_bytes_pipe_lsu_mem_global_op_ld`` (+ ``ldgsts``) and ``..._op_st``, against
  the kernel view's L1 bytes (:func:`flashsim.model.kernel_io.kernel_io`: ``l1_load_bytes``/``l1_store_bytes``,
  32-byte sectors per warp instruction) — the criterion is equality, byte for byte; whether they also equal its
  element bytes (``load_bytes``/``store_bytes``, what the interpreter counts) is recorded;
- the L2's bytes from the SMs (``lts__t_sectors_srcunit_tex_op_read/write`` × 32): requests the L1 did not absorb
  (tells a duplicated L1 request, which DRAM never sees, from a real extra load);
- DRAM read and write bytes against the L2 model (:func:`flashsim.model.kernel_io.kernel_dram`, its defaults: a
  write-back, segmented LRU over a bit under half the L2, one program per SM, dirty tiles counted when evicted
  during the kernel). Criterion (:mod:`flashsim.measure.criterion`, issue 28): per launch, read and write
  separately, |sim − ncu| ≤ max(5 % of that direction, 1 % of the launch's DRAM bytes in both directions, ncu's
  run-to-run spread for that launch where it was measured); every count is also given under the strict 5 % of each
  direction alone. Next to it: the previous model's settings (``PREVIOUS_MODEL``), and, to tell a miss in a
  near-zero direction from a wrong total, whether read + write together meet the same criterion.

- the same DRAM bytes with the write-back of each launch's dirty lines (:func:`measure_writeback`, judged by the
  criterion since 2026-12-02_4): each launch between read-only flush kernels in one ncu run with the caches left
  alone (WB_BEFORE before it, WB_AFTER after it, WB_BASE after those on a clean L2), the call WB_REPEATS times;
  its writes = its own + what the first flush after it writes back, less what the first flush on a clean L2
  writes of its own (WB_COUNTED), the median of the repeats; against the L2 model's ``flush_writes=True`` (every
  dirty byte once, as the closed forms and the simulator charge it). A probe first checks the method on a kernel
  writing 0.5-96 MiB (:func:`probe_writeback`); ``--rederive`` reads a run's stored rows again with another
  WB_COUNTED.

Device time: two ncu runs (``measure.ncu_profile_batch``: the three teaching kernels, then the two flash
kernels), each with all its configurations in one child process, sizes chosen so that the whole run stays under
about 5 minutes; predictions are computed in a process pool meanwhile. ``--budget-s`` (default 280) skips a
batch still waiting once it is spent; a batch that fails is retried kernel by kernel.

On the GPU machine::

    PYTHONPATH=$PWD python benchmarks/fidelity_h200.py --out $OUT

Here (no GPU): the configurations, their predictions and the device-time estimate, written like a real run
(measured sides empty)::

    .venv/bin/python benchmarks/fidelity_h200.py --dry-run --out /tmp/fidelity_dry [--kernels naive,flash_fwd]

Writes ``<out>/fidelity_h200.json`` and ``<out>/fidelity_h200.md`` (GPU, date, versions, command, per-launch
table, pass counts). ``--markdown-only RESULT.json`` rewrites the markdown from a result file.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HERE)

# the parts, one concern per module (benchmarks/fidelity_bench); the names other scripts and tests use are re-exported
from benchmarks.fidelity_bench.compare import (DRAM_LAUNCH_REL, DRAM_REL, compare, dram_ok,  # noqa: E402
                                               judge_launch, merge, recompare, rejudge, summarize)
from benchmarks.fidelity_bench.configs import (BATCHES, CONFIGS, KERNELS, MIB, NEWEST_TAG,  # noqa: E402
                                               PREVIOUS_MODEL, configs, estimate_device_seconds, predict)
from benchmarks.fidelity_bench.report import criterion_lines, write_markdown, writeback_table  # noqa: E402
from benchmarks.fidelity_bench.sweep import run  # noqa: E402
from benchmarks.fidelity_bench.writeback import (FLUSH_BLOCK, FLUSH_BYTES, FLUSH_KERNEL,  # noqa: E402
                                                 PROBE_KERNEL, PROBE_RESOLUTION_BYTES, PROBE_TOLERANCE_BYTES,
                                                 PROBE_WRITE_MIB, WB_AFTER, WB_BASE, WB_BEFORE, WB_COUNTED,
                                                 WB_METHOD, WB_REPEATS, measure_writeback, probe_summary,
                                                 probe_writeback, rederive, writeback_child, writeback_result)

__all__ = ["BATCHES", "CONFIGS", "DRAM_LAUNCH_REL", "DRAM_REL", "FLUSH_BLOCK", "FLUSH_BYTES", "FLUSH_KERNEL",
           "KERNELS", "MIB", "NEWEST_TAG", "PREVIOUS_MODEL", "PROBE_KERNEL", "PROBE_RESOLUTION_BYTES",
           "PROBE_TOLERANCE_BYTES", "PROBE_WRITE_MIB", "WB_AFTER", "WB_BASE", "WB_BEFORE", "WB_COUNTED", "WB_METHOD",
           "WB_REPEATS", "compare", "configs", "dram_ok", "estimate_device_seconds", "judge_launch", "main",
           "measure_writeback", "merge", "predict", "probe_summary", "probe_writeback", "recompare", "rederive",
           "rejudge", "run", "summarize", "write_markdown", "writeback_child", "writeback_result"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "fidelity_out"), help="folder for the JSON and MD")
    ap.add_argument("--kernels", default=",".join(KERNELS), help="comma-separated subset of " + ",".join(KERNELS))
    ap.add_argument("--dry-run", action="store_true", help="no GPU: list configurations and predictions only")
    ap.add_argument("--budget-s", type=float, default=280.0, help="device seconds after which kernels are skipped")
    ap.add_argument("--workers", type=int, default=8, help="processes computing the predictions")
    ap.add_argument("--markdown-only", help="a fidelity_h200.json to rewrite the markdown of")
    ap.add_argument("--recompare", help="a fidelity_h200.json whose measurements to compare with the current model "
                    "(no GPU); rewrites it and its markdown, or writes --recompare-out")
    ap.add_argument("--recompare-out", help="with --recompare: the JSON to write instead (its markdown beside it)")
    ap.add_argument("--note", default="", help="with --recompare: one line saying what changed since the run")
    ap.add_argument("--merge", help="comma-separated fidelity_h200.json files, oldest first: print (and with --out, "
                    "write merged.md) one summary, a configuration measured again counted at its newest run")
    ap.add_argument("--no-window", action="store_true", help="skip ncu's per-kernel window measurement")
    ap.add_argument("--no-writeback", action="store_true", help="skip the write-back measurement")
    ap.add_argument("--sets", default="", help="comma-separated configuration sets to measure (default: all)")
    ap.add_argument("--window-sets", default="", help="comma-separated sets ncu's per-kernel window measures "
                    "(default: all measured)")
    ap.add_argument("--wb-before", type=int, default=WB_BEFORE, help="flushes before each measured launch")
    ap.add_argument("--wb-after", type=int, default=WB_AFTER, help="flushes after it, counted")
    ap.add_argument("--wb-base", type=int, default=WB_BASE, help="flushes after those, subtracted (0: the run's "
                    "median of a flush after a flush)")
    ap.add_argument("--wb-repeats", type=int, default=WB_REPEATS, help="calls per configuration (median)")
    ap.add_argument("--wb-counted", type=int, default=WB_COUNTED, help="of the after (and base) flushes, how many "
                    "count")
    ap.add_argument("--rederive", help="a fidelity_h200.json with raw write-back rows: read them again with the "
                    "--wb-* method (no GPU); rewrites it and its markdown")
    ap.add_argument("--hardware", default=None, help="the preset the predictions are made for (default: the GPU "
                    "this runs on, with its SM count and L2 size; a dry run without one: h200, the GPU the L2 model "
                    "was fitted on); the files are named after it: fidelity_<gpu>.json and .md")
    ap.add_argument("--writeback-child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.writeback_child:
        writeback_child(a.writeback_child)
        return 0
    if a.merge:
        paths = a.merge.split(",")
        results = []
        for path in paths:
            with open(path) as f:
                results.append(json.load(f))
        m = merge(results)
        lines = [f"Merged ({m['replaced']} configurations counted at a later run): "
                 + ", ".join(os.path.basename(p) for p in paths), ""] + criterion_lines(m["summary"]) \
            + [""] + writeback_table(m["summary"])
        print("\n".join(lines))
        if a.out != ap.get_default("out"):
            os.makedirs(a.out, exist_ok=True)
            with open(os.path.join(a.out, "merged.md"), "w") as f:
                f.write("\n".join(lines) + "\n")
        return 0
    if a.recompare:
        with open(a.recompare) as f:
            res = recompare(json.load(f), a.workers)
        res["recompared"]["note"] = a.note
        res["recompared"]["source"] = os.path.basename(a.recompare)
        dest = a.recompare_out or a.recompare
        with open(dest, "w") as f:
            json.dump(res, f, indent=1, default=str)
        write_markdown(res, os.path.splitext(dest)[0] + ".md")
        print(json.dumps(res["recompared"]["summary"], indent=1))
        return 0
    if a.rederive:
        with open(a.rederive) as f:
            res = rederive(json.load(f), {"before": a.wb_before, "after": a.wb_after, "base": a.wb_base,
                                          "repeats": a.wb_repeats, "counted": a.wb_counted})
        with open(a.rederive, "w") as f:
            json.dump(res, f, indent=1, default=str)
        write_markdown(res, os.path.splitext(a.rederive)[0] + ".md")
        print(json.dumps(res["summary"], indent=1))
        return 0
    if a.markdown_only:
        with open(a.markdown_only) as f:
            res = json.load(f)
        write_markdown(res, os.path.splitext(a.markdown_only)[0] + ".md")
        return 0
    kernels = tuple(k for k in a.kernels.split(",") if k)
    bad = [k for k in kernels if k not in KERNELS]
    if bad:
        ap.error(f"unknown kernels {bad}: use some of {list(KERNELS)}")
    res = run(a.out, kernels, a.dry_run, a.budget_s, a.workers, window=not a.no_window,
              writeback=not a.no_writeback, sets=set(a.sets.split(",")) if a.sets else None,
              window_sets=set(a.window_sets.split(",")) if a.window_sets else None,
              method={"before": a.wb_before, "after": a.wb_after, "base": a.wb_base, "repeats": a.wb_repeats,
                      "counted": a.wb_counted}, hardware=a.hardware)
    print(json.dumps(res["summary"], indent=1))
    print("\n".join(criterion_lines(res["summary"])))
    print(f"estimated device time {res['estimated_device_seconds']} s; wrote {a.out}/fidelity_{res['gpu_tag']}.json "
          "and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
