"""The run of benchmarks/fidelity_h200.py: the write-back probe and measurement, ncu's per-kernel window in batches
within the device budget, the predictions in a process pool meanwhile, the comparison, the JSON and the markdown
(or, with ``dry_run``, the predictions alone)."""
from __future__ import annotations

import json
import os
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor

from flashsim.measure import criterion

from .compare import compare, summarize
from .configs import (FIT_GPU, KERNELS, MIB, batches, configs, estimate_device_seconds, hardware_record, predict,
                      run_hardware, runner_args)
from .report import write_markdown
from .writeback import FLUSH_BYTES, WB_METHOD, measure_writeback, probe_writeback

# --- the run -------------------------------------------------------------------------------------------------------

def gpu_tag(hw) -> str:
    """The short name a run's files carry: the preset key of its GPU ("h200", "h100"), else its name in lower
    case letters and digits."""
    from flashsim.model.hardware import _known_preset_key
    return _known_preset_key(hw.name) or "".join(ch for ch in hw.name.lower() if ch.isalnum()) or "gpu"


def run(out_dir: str, kernels=KERNELS, dry_run: bool = False, budget_s: float = 280.0, workers: int = 8,
        window: bool = True, writeback: bool = True, sets=None, window_sets=None, method=None,
        hardware=None) -> dict:
    """Measure ``kernels`` (configurations of ``sets``; None = all) with ncu: ``window`` = each kernel alone,
    caches flushed (ncu's per-kernel window, all counters; only the configurations of ``window_sets`` unless
    None); ``writeback`` = the verification of the write-back method (``probe_writeback``), then each launch
    between flushes (``measure_writeback``; ``method``: its before/after/base/repeats, default the WB_ constants).
    After the write-back measurement, ``<out>/fidelity_h200_partial.json`` holds its raw results (kept if a later
    step runs out of time)."""
    method = dict(WB_METHOD, **(method or {}))
    os.makedirs(out_dir, exist_ok=True)
    t_start = time.time()
    cfgs = [c for c in configs(kernels) if sets is None or c["set"] in sets]
    command = "PYTHONPATH=$PWD python benchmarks/fidelity_h200.py " + " ".join(sys.argv[1:])
    result = {"info": _run_info(command, dry_run), "criteria": {
        "requested": "kernel view L1 load/store bytes (32-byte sectors per warp instruction) == ncu "
                     "l1tex__t_bytes_pipe_lsu_mem_global_op_ld(+ldgsts)/op_st, per launch",
        "dram": criterion.TEXT, "dram_strict": criterion.STRICT_TEXT},
        "estimated_device_seconds": round(estimate_device_seconds(cfgs)), "rows": [],
        "writeback_method": method}
    hw = run_hardware({} if dry_run else result["info"], hardware)     # a dry run: FIT_GPU unless told
    tag = gpu_tag(hw)
    # predictions for the GPU measured (its SMs and L2), every L2-model constant as fitted on FIT_GPU: on another
    # GPU the run is a hold-out
    result.update(hardware=hardware_record(hw), fit_gpu=FIT_GPU, holdout=tag != FIT_GPU, gpu_tag=tag)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(predict, c, hw) for c in cfgs]
        measured = [None] * len(cfgs)
        wb = [None] * len(cfgs)      # the write-back measurement first: the criterion is judged on it
        if writeback and not dry_run:
            t0 = time.time()
            try:
                result["writeback_probe"] = probe_writeback(timeout=max(30.0, min(150.0, budget_s - (t0 - t_start))),
                                                            **method)
                flush_bytes = result["writeback_probe"]["chosen"]
            except Exception:
                result.setdefault("errors", {})["writeback_probe"] = traceback.format_exc()[-3000:]
                flush_bytes = 4 * FLUSH_BYTES
            print(f"[{time.time() - t_start:6.1f}s] write-back probe in {time.time() - t0:.0f}s: flush "
                  f"{flush_bytes / MIB:.0f} MiB", flush=True)
            result["writeback_flush_bytes"] = flush_bytes
            def profile_writeback(batch) -> bool:
                idx = [i for i, c in enumerate(cfgs) if c["kernel"] in batch]
                left = budget_s - (time.time() - t_start)
                if not idx or left < 20:
                    if idx:
                        result.setdefault("skipped", []).append(f"write-back {'+'.join(batch)}: budget spent")
                    return True
                t0 = time.time()
                try:
                    for i, g in zip(idx, measure_writeback([cfgs[i] for i in idx], flush_bytes, timeout=left,
                                                           **method)):
                        wb[i] = g
                    return True
                except Exception:
                    result.setdefault("errors", {})["writeback " + "+".join(batch)] = traceback.format_exc()[-3000:]
                    return False
                finally:
                    print(f"[{time.time() - t_start:6.1f}s] write-back {'+'.join(batch)}: {len(idx)} configs in "
                          f"{time.time() - t0:.0f}s", flush=True)

            for batch in batches(kernels):
                if not profile_writeback(batch) and len(batch) > 1:
                    for k in batch:  # one bad config loses only its kernel
                        profile_writeback((k,))
                with open(os.path.join(out_dir, f"fidelity_{tag}_partial.json"), "w") as f:
                    json.dump({k: result.get(k) for k in ("info", "writeback_probe", "writeback_flush_bytes",
                                                          "errors", "skipped")}
                              | {"configs": cfgs, "writeback": wb}, f, default=str)
        if not dry_run:
            from flashsim.measure import ncu_profile_batch

            def profile(names) -> bool:
                idx = [i for i, c in enumerate(cfgs) if c["kernel"] in names
                       and (window_sets is None or c["set"] in window_sets)]
                if not idx:
                    return True
                left = budget_s - (time.time() - t_start)
                if left < 30:
                    result.setdefault("skipped", []).append(f"{'+'.join(names)}: device budget of {budget_s:.0f} s spent")
                    return True
                t0 = time.time()
                try:
                    got = ncu_profile_batch([runner_args(cfgs[i]) for i in idx], timeout=left)
                except Exception:
                    result.setdefault("errors", {})["+".join(names)] = traceback.format_exc()[-3000:]
                    return False
                finally:
                    print(f"[{time.time() - t_start:6.1f}s] ncu {'+'.join(names)}: {len(idx)} configs in "
                          f"{time.time() - t0:.0f}s", flush=True)
                for i, g in zip(idx, got):
                    measured[i] = g
                return True

            for batch in (batches(kernels) if window else []):
                if not profile(batch) and len(batch) > 1:
                    for k in batch:  # one bad config loses only its kernel
                        profile((k,))
        for c, f, m, w in zip(cfgs, futures, measured, wb):
            try:
                pred = f.result(timeout=600)
            except Exception:
                result["rows"].append({"config": c, "error": traceback.format_exc()[-2000:]})
                continue
            row = compare(c, pred, m, w if w and "launches" in w else None)
            row["predicted"] = pred
            row["measured"] = m
            row["writeback"] = w
            result["rows"].append(row)
    result["summary"] = summarize(result)
    result["wall_seconds"] = round(time.time() - t_start, 1)
    with open(os.path.join(out_dir, f"fidelity_{tag}.json"), "w") as f:
        json.dump(result, f, indent=1, default=str)
    write_markdown(result, os.path.join(out_dir, f"fidelity_{tag}.md"))
    return result


def _run_info(command: str, dry_run: bool) -> dict:
    try:
        from flashsim.measure.provenance import run_info
        info = run_info(command)
    except ImportError:  # no torch here: still say when and how
        import platform
        info = {"python": platform.python_version(), "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
                "command": command, "gpu": None}
    info["dry_run"] = dry_run
    return info
