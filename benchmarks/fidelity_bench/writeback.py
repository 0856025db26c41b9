"""The write-back measurement of benchmarks/fidelity_h200.py: each launch between read-only flush kernels in one ncu
run with the caches left alone, its method (the WB_ constants), the child process ncu profiles (its flush and probe
kernels, the only part that needs Triton), the probe that verifies the method on known writes, and a run's stored
rows read again with another method (``--rederive``).

This file is also the child process's script: ``_writeback_ncu`` runs ``python <this file> --writeback-child SPEC``
under ncu (hence the absolute imports below)."""
from __future__ import annotations

import json
import os
import sys
import traceback

#: the repository root: the child process's PYTHONPATH
HERE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if __name__ == "__main__":            # run as the child process: the repository root importable
    sys.path.insert(0, HERE)

from benchmarks.fidelity_bench.compare import compare, summarize  # noqa: E402
from benchmarks.fidelity_bench.configs import MIB, runner_args  # noqa: E402

if "--writeback-child" in sys.argv:   # the write-back measurement's own kernels, in its child process on the GPU
    from flashsim.kernels import select_backend
    select_backend()                    # before triton is imported (flashsim.kernels.runtime)
    import triton
    import triton.language as tl
else:                                   # the rest of the script needs no triton
    triton = None

#: the write-back measurement (``measure_writeback``): a read-only flush kernel of FLUSH_BYTES after each launch
FLUSH_KERNEL, PROBE_KERNEL = "_l2_flush_kernel", "_write_probe_kernel"
FLUSH_BYTES = 256 * MIB          # > 4x the H200's 60 MiB L2
FLUSH_BLOCK = 4096               # int32 per flush program (16 KiB)
#: per measured launch: WB_BEFORE flushes (a clean L2), the launch, WB_AFTER flushes (its write-back, all
#: counted), WB_BASE flushes (the same flushes on a clean L2, adjacent in time: their own writes, subtracted); the
#: measured call WB_REPEATS times, the median per launch. 2026-12-02_4 had 1, 1, 0 (a run-wide median of the
#: flush's own writes, 0.38 MiB, subtracted) and 1 repeat: write-once launches measured -0.40..+0.02 MiB off
#: their stored bytes, where the criterion allows 0.02-0.38 MiB
WB_BEFORE, WB_AFTER, WB_BASE, WB_REPEATS = 2, 2, 2, 3
#: of the WB_AFTER flushes (and as many base flushes) only the first counted: chosen on the probe of
#: 2026-12-02_5 (writes of 0.5-24 MiB, the median of 3 repeats): counting 1 and subtracting 1 adjacent base flush
#: was off by +0.08..+0.21 MiB, 2 and 2 by +0.07..+0.30, 1 less the run's median flush by +0.07..+0.24; the second
#: flush after a launch writes what a flush on a clean L2 does (median 0.08 MiB, 2940 flushes): nothing is left
WB_COUNTED = 1
#: the write-back method as one dict (probe_writeback, measure_writeback, run and rederive take its keys)
WB_METHOD = dict(before=WB_BEFORE, after=WB_AFTER, base=WB_BASE, repeats=WB_REPEATS, counted=WB_COUNTED)
#: the verification before the sweep: a kernel writing X MiB must show X MiB of writes in window + flushes
PROBE_WRITE_MIB = (0.5, 2, 8, 24, 48, 96)
#: what the probe allows: the first run (2026-12-02_4, call 1) found window + flush within 0.1-0.7 MiB of the bytes
#: written with a flush of 256 MiB (0.2-1.2 MiB with 1 GiB), and a flush after a flush writing 0.05-0.5 MiB itself
PROBE_TOLERANCE_BYTES = 1 * MIB
#: the resolution asked of the method (the probe's worst error on writes that fit in the L2): well under the
#: 0.12-0.40 MiB by which 2026-12-02_4 missed write-once launches, and about the allowance of a 1 MiB write in a
#: launch moving more than 40 MiB (5 %)
PROBE_RESOLUTION_BYTES = 0.05 * MIB


if triton is not None:
    @triton.jit
    def _l2_flush_kernel(src, sink, n_elem, BLOCK: tl.constexpr):
        """Reads ``BLOCK`` int32 of ``src`` per program (BLOCK x 4 bytes loaded); stores nothing (``src`` is
        zeros, and the store's mask asks for a sum it never has)."""
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(src + offs, mask=offs < n_elem, other=0)       # BLOCK x 4 bytes
        total = tl.sum(x, axis=0)
        tl.store(sink + pid, total, mask=total == 123456789)       # 0 bytes: never true

    @triton.jit
    def _write_probe_kernel(dst, n_elem, BLOCK: tl.constexpr):
        """Writes ``BLOCK`` int32 ones per program (BLOCK x 4 bytes stored), reads nothing."""
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        tl.store(dst + offs, tl.full([BLOCK], 1, tl.int32), mask=offs < n_elem)   # BLOCK x 4 bytes


# --- the write-back measurement: each launch, then a flush that writes its dirty lines back --------------------

def _set_hooks(enter, exit_) -> None:
    """Triton's launch-enter and launch-exit hooks (None = remove): a HookChain in newer Triton, one callable in
    older."""
    rt = triton.knobs.runtime
    for attr, fn in (("launch_enter_hook", enter), ("launch_exit_hook", exit_)):
        chain = getattr(rt, attr)
        if hasattr(chain, "add"):
            if fn is None:
                for f in list(getattr(chain, "calls", [])):
                    chain.remove(f)
            else:
                chain.add(fn)
        else:
            setattr(rt, attr, fn)


def writeback_child(spec_path: str) -> None:
    """The process ``measure_writeback`` profiles (``--writeback-child SPEC``), with the profiler off except
    around each measured call: flush, flush, then the call ``spec["repeats"]`` times, each of its Triton launches
    between ``spec["before"]`` flushes (launch-enter hook: they write back what ran unprofiled before the launch,
    such as an output's NaN fill) and ``spec["after"]`` + ``spec["base"]`` flushes (launch-exit hook: the launch's
    own dirty lines, then the flushes' own writes on a clean L2). ``spec["probe"]``: first, the verification
    steps [["flush"|"write", bytes], ...]. Writes ``spec["log"]``: per config the launches hooked (to split ncu's
    rows) and any error."""
    import torch

    from flashsim.measure.runners import kernel_runner
    with open(spec_path) as f:
        spec = json.load(f)
    flush_bytes = int(spec.get("flush_bytes", FLUSH_BYTES))
    sizes = {flush_bytes} | {int(b) for kind, b in spec.get("probe") or [] if kind == "flush"}
    bufs = {b: torch.zeros(b // 4, dtype=torch.int32, device="cuda") for b in sizes}
    sink = torch.zeros(max(sizes) // 4 // FLUSH_BLOCK + 1, dtype=torch.int32, device="cuda")
    state = {"on": False, "busy": False, "count": 0}

    def flush(nbytes=flush_bytes):
        buf = bufs[nbytes]
        _l2_flush_kernel[(triton.cdiv(buf.numel(), FLUSH_BLOCK),)](buf, sink, buf.numel(), BLOCK=FLUSH_BLOCK)

    def write(nbytes):
        dst = torch.empty(int(nbytes) // 4, dtype=torch.int32, device="cuda")
        _write_probe_kernel[(triton.cdiv(dst.numel(), FLUSH_BLOCK),)](dst, dst.numel(), BLOCK=FLUSH_BLOCK)
        return dst

    flushes = {0: int(spec.get("before", 1)), 1: int(spec.get("after", 1)) + int(spec.get("base", 0))}

    def hook(count):
        def fn(*args, **kwargs):
            if state["on"] and not state["busy"]:
                state["busy"] = True
                try:
                    for _ in range(flushes[count]):
                        flush()
                    state["count"] += count
                finally:
                    state["busy"] = False
        return fn

    for b in sizes:            # compile both kernels, and warm the buffers, before anything is profiled
        flush(b)
    keep = write(1 << 20)
    torch.cuda.synchronize()
    _set_hooks(hook(0), hook(1))
    log = {"configs": []}
    if spec.get("probe"):
        keep = []
        torch.cuda.profiler.start()
        for kind, nbytes in spec["probe"]:
            if kind == "flush":
                flush(int(nbytes))
            else:
                keep.append(write(int(nbytes)))
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()
    for i, cfg in enumerate(spec.get("configs", [])):
        entry = {"i": i, "started": False, "count": 0}
        fn = None
        try:
            fn = kernel_runner(**cfg)
            fn()                   # compiles; not profiled
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
            entry["started"] = True
            flush()
            flush()
            state["count"] = 0
            state["on"] = True
            for _ in range(int(spec.get("repeats", 1))):
                fn()
            state["on"] = False
            torch.cuda.synchronize()
        except Exception:
            entry["error"] = traceback.format_exc()[-1500:]
        finally:
            state["on"] = False
            entry["count"] = state["count"]
            if entry["started"]:
                torch.cuda.profiler.stop()
        log["configs"].append(entry)
        del fn
        torch.cuda.empty_cache()
    with open(spec["log"], "w") as f:
        json.dump(log, f)


def _writeback_ncu(spec: dict, names, timeout: float) -> tuple:
    """Run writeback_child on ``spec`` under ncu: (ncu's launch records, the passes per launch, the child's log)."""
    import tempfile

    from flashsim.measure.ncu import ncu_launch_sequence
    tmp = tempfile.mkdtemp(prefix="fid_wb_")
    spec = dict(spec, log=os.path.join(tmp, "log.json"))
    path = os.path.join(tmp, "spec.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [HERE, env.get("PYTHONPATH", "")] if p)
    regex = "^(" + "|".join(sorted(set(names) | {FLUSH_KERNEL, PROBE_KERNEL})) + ")$"
    got = ncu_launch_sequence([sys.executable, os.path.abspath(__file__), "--writeback-child", path], regex,
                              timeout=timeout, env=env)
    with open(spec["log"]) as f:
        log = json.load(f)
    return got["launches"], got["passes"], log


def probe_writeback(flush_sizes=(4 * FLUSH_BYTES,), timeout: float = 120.0, before: int = WB_BEFORE,
                    after: int = WB_AFTER, base: int = WB_BASE, repeats: int = WB_REPEATS,
                    counted: int = WB_COUNTED) -> dict:
    """Verify the method on the device: a kernel writing X MiB (PROBE_WRITE_MIB, 0.5 to 96 MiB, below and above
    the L2), measured as a launch is (``before`` flushes, the write, ``after`` flushes of which the first
    ``counted`` count, ``base`` flushes of which as many are subtracted, ``repeats`` times, the median) must show
    X MiB: :func:`probe_summary` of ncu's rows."""
    steps = []
    for fb in flush_sizes:
        steps += [["flush", fb], ["flush", fb]]
        for _ in range(repeats):
            for x in PROBE_WRITE_MIB:
                steps += [["flush", fb]] * before + [["write", int(x * MIB)]] + [["flush", fb]] * (after + base)
    launches, passes, _ = _writeback_ncu({"probe": steps, "flush_bytes": max(flush_sizes)}, [], timeout)
    if len(launches) != len(steps):
        raise RuntimeError(f"probe: {len(steps)} steps, {len(launches)} launches profiled")
    rows = [dict(step=st[0], bytes=st[1], kernel=L["kernel"], dram_read_bytes=L["dram_read_bytes"],
                 dram_write_bytes=L["dram_write_bytes"]) for st, L in zip(steps, launches)]
    return dict(probe_summary(rows, flush_sizes, dict(before=before, after=after, base=base, repeats=repeats,
                                                      counted=counted)), passes=passes)


def probe_summary(rows: list, flush_sizes, method: dict) -> dict:
    """The probe's ``rows`` (one per step: step, bytes, kernel, ncu's DRAM bytes) read with ``method``
    (before/after/base/repeats/counted). Per flush size: the cases (median error, each repeat's), the worst error,
    the worst error of the writes that fit in the L2 (``resolution_bytes``) and the largest own writes subtracted.
    ``chosen``: the smallest flush size whose worst error is within PROBE_TOLERANCE_BYTES (else the largest);
    ``verified``: some size is, and its resolution is within PROBE_RESOLUTION_BYTES."""
    from flashsim.measure.ncu import writeback_median, writeback_totals
    m = dict({"counted": method.get("after", 1)}, **method)
    block = m["before"] + 1 + m["after"] + m["base"]
    per_size, pos = {}, 0
    for fb in flush_sizes:
        n_rows = 2 + block * m["repeats"] * len(PROBE_WRITE_MIB)
        chunk = rows[pos:pos + n_rows]
        pos += n_rows
        got = writeback_median(writeback_totals(chunk, FLUSH_KERNEL, before=m["before"], after=m["after"],
                                                base=m["base"], counted=m["counted"])["launches"],
                               [PROBE_KERNEL] * len(PROBE_WRITE_MIB))
        cases = []
        for x, g in zip(PROBE_WRITE_MIB, got):
            cases.append({"write_bytes": int(x * MIB), "window_write_bytes": g["window_write_bytes"],
                          "residue_write_bytes": g["residue_write_bytes"], "own_write_bytes": g["own_write_bytes"],
                          "total_write_bytes": g["total_write_bytes"], "error_bytes": g["total_write_bytes"] - x * MIB,
                          "repeat_errors_bytes": [w - x * MIB for _, w, _ in g["repeats"]],
                          "flush_read_bytes": g["residue_read_bytes"]})
        fits = [c for c in cases if c["write_bytes"] < 32 * MIB]
        per_size[str(fb)] = {"cases": cases, "worst_error_bytes": max(abs(c["error_bytes"]) for c in cases),
                             "resolution_bytes": max(abs(c["error_bytes"]) for c in fits),
                             "own_write_bytes_max": max(c["own_write_bytes"] for c in cases)}
    ok = [fb for fb in flush_sizes if per_size[str(fb)]["worst_error_bytes"] <= PROBE_TOLERANCE_BYTES]
    chosen = min(ok) if ok else max(flush_sizes)
    return {"rows": rows, "per_flush_size": per_size, "chosen": chosen, "method": m,
            "verified": bool(ok) and per_size[str(chosen)]["resolution_bytes"] <= PROBE_RESOLUTION_BYTES}


def measure_writeback(cfgs: list[dict], flush_bytes: int = FLUSH_BYTES, timeout: float = 300.0,
                      before: int = WB_BEFORE, after: int = WB_AFTER, base: int = WB_BASE,
                      repeats: int = WB_REPEATS, counted: int = WB_COUNTED) -> list:
    """Per config (None where it failed): :func:`writeback_result` of its launches, from one ncu run of all of
    them (``--cache-control none``, two DRAM counters)."""
    from flashsim.measure.runners import KERNEL_FUNCTIONS
    names = {n for c in cfgs for n in KERNEL_FUNCTIONS[c["kernel"]]}
    spec = {"configs": [runner_args(c) for c in cfgs], "flush_bytes": flush_bytes, "before": before,
            "after": after, "base": base, "repeats": repeats}
    launches, passes, log = _writeback_ncu(spec, names, timeout)
    block = before + 1 + after + base
    chunks, pos = [], 0
    for c, entry in zip(cfgs, log["configs"]):
        n_rows = (2 if entry["started"] else 0) + block * entry["count"]
        chunks.append(launches[pos:pos + n_rows])
        pos += n_rows
    method = dict(before=before, after=after, base=base, repeats=repeats, counted=counted)
    median = _median_flush_writes(chunks)
    out = []
    for c, entry, got in zip(cfgs, log["configs"], chunks):
        res = ({"error": entry["error"]} if entry.get("error")
               else writeback_result(c, got, method, median))
        if "error" not in res:
            res.update(flush_bytes=flush_bytes, passes=sorted(set(passes)) if passes else None)
        out.append(res)
    return out


def _median_flush_writes(chunks: list) -> float:
    """Without base flushes: the flush's own writes (a flush after a flush: 0.05-1 MiB, 2026-12-02_4) vary from
    range to range: their median over the run (each range's second flush), subtracted rather than one sample."""
    baselines = sorted(got[1]["dram_write_bytes"] for got in chunks if len(got) >= 2)
    return baselines[len(baselines) // 2] if baselines else 0.0


def writeback_result(cfg: dict, got: list, method: dict, median_flush_writes: float = 0.0) -> dict:
    """One config's ncu rows ``got`` (its profiled range: [F, F, blocks...]) read with ``method``
    (before/after/base/repeats/counted): ``writeback_totals`` per block (with base flushes the flushes' own
    writes measured next to each launch, else ``median_flush_writes`` subtracted), the median of the repeats per
    launch (``writeback_median``), and ``raw``: the rows as [kernel, read, write]; {"error"} when the launches are
    not the kernel's, repeats times."""
    from flashsim.measure.ncu import writeback_median, writeback_totals
    from flashsim.measure.runners import KERNEL_FUNCTIONS
    m = dict({"counted": method.get("after", 1)}, **method)
    block = m["before"] + 1 + m["after"] + m["base"]
    expect = KERNEL_FUNCTIONS[cfg["kernel"]]
    seen = [L["kernel"] for L in got[2 + m["before"]::block]]
    if seen != list(expect) * m["repeats"]:
        return {"error": f"launches {seen}, expected {list(expect)} x {m['repeats']}"}
    res = writeback_totals(got, FLUSH_KERNEL, baseline_write_bytes=None if m["base"] else median_flush_writes,
                           before=m["before"], after=m["after"], base=m["base"], counted=m["counted"])
    res["launches"] = writeback_median(res["launches"], list(expect))
    res["raw"] = [[L["kernel"], int(L["dram_read_bytes"]), int(L["dram_write_bytes"])] for L in got]
    res.update(m)
    return res


def rederive(result: dict, method: dict | None = None) -> dict:
    """Read a run's stored ncu rows again (no GPU) with ``method`` (default: the WB_ constants; its before,
    after, base and repeats must be the run's): the probe's summary, each config's write-back result and its
    comparison with the predictions stored in the run; ``result["writeback_method"]`` and the summary updated,
    the method the run was read with at first kept as ``result["writeback_method_at_run"]``."""
    run_m = result.get("writeback_method") or {}
    m = dict(WB_METHOD, **(method or {}))
    if any(run_m.get(k) not in (None, m[k]) for k in ("before", "after", "base", "repeats")):
        raise ValueError(f"rederive: the run measured {run_m}, not {m}")
    result.setdefault("writeback_method_at_run", dict(run_m))
    result["writeback_method"] = m
    probe = result.get("writeback_probe")
    if probe:
        passes = probe.get("passes")
        result["writeback_probe"] = dict(probe_summary(probe["rows"], [int(k) for k in probe["per_flush_size"]], m),
                                         passes=passes)
    for row in result["rows"]:
        wb = row.get("writeback")
        if not wb or "raw" not in wb:
            continue
        got = [{"kernel": k, "dram_read_bytes": float(r), "dram_write_bytes": float(w)} for k, r, w in wb["raw"]]
        new = writeback_result(row["config"], got, m)
        new.update({k: wb[k] for k in ("flush_bytes", "passes") if k in wb})
        row["writeback"] = new
        row["launches"] = compare(row["config"], row["predicted"], row.get("measured"),
                                  new if "launches" in new else None)["launches"]
    result["summary"] = summarize(result)
    return result


if __name__ == "__main__":   # the child process _writeback_ncu starts: python <this file> --writeback-child SPEC
    writeback_child(sys.argv[sys.argv.index("--writeback-child") + 1])
