"""Chapter 12 dashboard: the learner's kernel under block-size controls, measured IO against the kernel view.

:class:`KernelBlockDashboard` (on the course's dashboard base) is driven by ``update(block_m=..., block_n=...,
causal=...)`` and keeps ``current``, so tests drive it without Jupyter. In the interpreter each move runs the
kernel at a small N and counts its loads and stores; on a GPU it times the kernel (``do_bench`` median) at a full
size instead. Until the learner's kernel passes, it runs the course's own kernel (:func:`learner_or_course_kernel`).

The chapter's last section ("what an H200 adds") reads the recorded GPU results (:mod:`flashsim.course.kit.results`,
copies of the raw record in ``benchmarks/results/``): :func:`tuning_summary` (pointer loads vs TMA, best
configuration per kernel), :func:`wide_sweep_summary` (pipeline stages, shared-memory limits, warp specialization),
:func:`pingpong_summary` (the manual ping-pong experiment) and :func:`speed_headline` (the speed grid against
PyTorch's SDPA backends), each with a ``*_table`` for the notebook. Each also reads a JSON file of the same kind
(``path=``), e.g. a learner's own GPU run; an unusable file is said so and gives None or [].
"""
from __future__ import annotations

import inspect
import json
import re
import statistics
from pathlib import Path

from flashsim.course import pick
from flashsim.course.ch12.figures import KernelIOPlot
from flashsim.course.kit.dashboard import Dashboard, slider, toggle
from flashsim.course.kit.optional import missing
from flashsim.course.kit.results import load_result, recorded_names, result_source
from flashsim.model.kernel_io import kernel_io
from flashsim.model.table import Table

__all__ = ["KernelBlockDashboard", "template_source", "learner_or_course_kernel", "TUNING_KERNELS",
           "TUNING_KERNEL_LABELS", "config_label", "load_tuning", "tuned_configs", "tuning_summary", "tuning_table",
           "wide_sweep_summary", "pipelining_table", "warp_specialization_table", "pingpong_summary",
           "pingpong_table", "speed_headline", "speed_headline_table"]

BLOCKS = (16, 32, 64, 128)


def template_source() -> str:
    """The Triton source of the chapter-12 template kernel (:mod:`flashsim.course.ch12.template`), to read."""
    from flashsim.course.ch12.template import _flash_template_kernel     # lazy: the template imports triton
    return inspect.getsource(getattr(_flash_template_kernel, "fn", _flash_template_kernel))


def learner_or_course_kernel(inner, verdict):
    """The learner's inner-loop function if its verdict passed, else None: the cells below then run the course's
    own kernel, :func:`flashsim.kernels.flash_forward` (the same FA2 forward, argument names and bytes)."""
    if verdict:
        print("using your kernel")
        return inner
    print("your kernel did not pass yet: the cells below use the course's kernel (flashsim.kernels.flash_forward)")
    return None


def _nonzero(io: dict) -> dict:
    return {kind: {t: b for t, b in io[kind].items() if b} for kind in ("loads", "stores")}


def _one_launch(per_tensor: dict) -> dict:
    """The {"loads", "stores"} of a call that launches one kernel (the template, or the course's forward)."""
    (launch,) = per_tensor.values()
    return launch


class KernelBlockDashboard(Dashboard):
    """BLOCK_M / BLOCK_N / causal controls over the learner's kernel, or the course's (``inner=None``) (chapter 12).

    In the interpreter each move runs the kernel at a small N and counts its loads and stores; on a GPU it times it
    (``do_bench`` median) at a full size instead. ``current`` = {"block_m", "block_n", "causal", "simulated":
    {"loads", "stores"}, "measured": ... or None, "time_ms": ... or None, "exact": bool or None}.
    """

    plot = KernelIOPlot

    def __init__(self, inner=None, n: int | None = None, d: int | None = None, block_m: int = 32,
                 block_n: int = 32, causal: bool = False):
        from flashsim.kernels import INTERPRETER                 # lazy: flashsim.kernels imports torch and triton
        self.inner = inner
        self.interpreter = bool(INTERPRETER)
        self.n = int(n or (96 if self.interpreter else pick(small=1024, full=4096)))
        self.d = int(d or (32 if self.interpreter else 64))
        self.dtype = "fp32" if self.interpreter else "fp16"
        self.block_m, self.block_n, self.causal = int(block_m), int(block_n), bool(causal)
        self._cache: dict = {}
        self.current: dict = {}
        self.update()

    def controls(self):
        return {"block_m": slider("BLOCK_M", BLOCKS), "block_n": slider("BLOCK_N", BLOCKS),
                "causal": toggle("causal")}

    def _run(self, q, k, v, causal: bool, block_m: int, block_n: int):
        if self.inner is None:
            from flashsim.kernels import flash_forward
            return flash_forward(q, k, v, causal=causal, block_m=block_m, block_n=block_n)
        from flashsim.course.ch12.template import flash_forward_template
        return flash_forward_template(q, k, v, self.inner, causal=causal, block_m=block_m, block_n=block_n)

    def measure(self, block_m: int, block_n: int, causal: bool) -> dict:
        key = (int(block_m), int(block_n), bool(causal))
        if key in self._cache:
            return self._cache[key]
        from flashsim.measure import bench, count_io, make_inputs   # lazy: flashsim.measure imports torch
        sim = _one_launch(kernel_io("flash_fwd", self.n, self.d, block_m, block_n, causal=causal,
                                    dtype=self.dtype).per_tensor())
        q, k, v = make_inputs("flash_fwd", self.n, self.d, self.dtype, device="cpu" if self.interpreter else "cuda",
                              seed=3)
        out = {"block_m": key[0], "block_n": key[1], "causal": key[2], "simulated": sim, "measured": None,
               "time_ms": None, "exact": None}
        if self.interpreter:
            counted = count_io(self._run, q, k, v, causal=key[2], block_m=key[0], block_n=key[1])
            out["measured"] = _one_launch(counted.per_tensor())
            out["exact"] = _nonzero(out["measured"]) == _nonzero(sim)
        else:
            out["time_ms"] = bench(lambda: self._run(q, k, v, key[2], key[0], key[1]))
        self._cache[key] = out
        return out

    def apply(self, block_m: int | None = None, block_n: int | None = None, causal: bool | None = None) -> dict:
        self.block_m = int(block_m if block_m is not None else self.block_m)
        self.block_n = int(block_n if block_n is not None else self.block_n)
        self.causal = bool(causal if causal is not None else self.causal)
        self.current = self.measure(self.block_m, self.block_n, self.causal)
        return self.current

    def readout(self) -> str:
        c = self.current
        sim = sum(c["simulated"]["loads"].values()) + sum(c["simulated"]["stores"].values())
        text = (f"{'your kernel' if self.inner is not None else 'the course kernel'}, N={self.n}, d={self.d}, "
                f"BLOCK_M={c['block_m']}, BLOCK_N={c['block_n']}, causal={c['causal']}: simulated {sim:,} B")
        if c["measured"] is not None:
            meas = sum(c["measured"]["loads"].values()) + sum(c["measured"]["stores"].values())
            text += f", measured {meas:,} B ({'equal' if c['exact'] else 'DIFFERENT'})"
        if c["time_ms"] is not None:
            text += f", {c['time_ms']:.3f} ms on the GPU"
        return text

    def plot_args(self) -> dict:
        c = self.current
        return {"simulated": c["simulated"], "measured": c["measured"],
                "title": f"N={self.n}, d={self.d}, BLOCK_M={c['block_m']}, BLOCK_N={c['block_n']}, "
                         f"{'causal' if c['causal'] else 'non-causal'}"}


# --- "what an H200 adds": the recorded GPU results (flashsim.course.kit.results), read, never hard-coded --------

#: the tuning sweep's kernel names (benchmarks/tune_attention.py), in the order tables list them
TUNING_KERNELS = ("fwd", "dkdv", "dq", "atomic")
#: what each of them is
TUNING_KERNEL_LABELS = {"fwd": "forward", "dkdv": "bwd K/V pass", "dq": "bwd dQ pass",
                        "atomic": "bwd one pass (atomic dQ)"}
#: the tuning sweep's kernel names -> the kernel names of flashsim.kernels._common.TUNED_H200
_TUNED_NAMES = {"fwd": "flash_fwd", "dkdv": "flash_bwd_dkdv", "dq": "flash_bwd_dq"}
#: recorded names (flashsim/course/recorded/manifest.json) of the ping-pong experiment, one per N
_PINGPONG = "tune_h200_pingpong_n"


def _read(path, recorded: str, need: str):
    """(source, data): the recorded result `recorded` when `path` is None (source: the raw file it copies), else the
    JSON file `path` (e.g. a learner's own GPU run). None, having said why, when that file is missing, unreadable,
    or lacks the key `need`."""
    if path is None:
        return result_source(recorded), load_result(recorded)
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        print(f"{path}: no such file: nothing to show")
        return None
    except (OSError, ValueError) as e:
        print(f"{path}: not a readable JSON file ({type(e).__name__}): nothing to show")
        return None
    if not isinstance(data, dict) or not data.get(need):
        print(f"{path}: no {need!r} in it: nothing to show")
        return None
    return str(path), data


def _config(r: dict) -> tuple:
    return (r["bm"], r["bn"], r["w"], r["s"])


def _round(x, digits: int):
    return None if x is None else round(x, digits)


def config_label(config) -> str:
    """(BLOCK_M, BLOCK_N, num_warps, num_stages) as "64×128 w4 s2" (chapter 12's tables)."""
    if not config:
        return "—"
    bm, bn, w, s = config
    return f"{bm}×{bn} w{w} s{s}"


def load_tuning(path=None, wide: bool = False, recorded: str | None = None) -> dict | None:
    """A tuning sweep of ``benchmarks/tune_attention.py`` (chapter 12): every kernel timed alone, fp16.

    By default the recorded sweep ``tune_h200`` (pointer loads vs TMA near the winners), or with ``wide=True``
    ``tune_h200_wide`` (the first, wide sweep with pointer loads); `recorded` names another recorded sweep, `path`
    reads a JSON file instead. Rows are normalised: ``kernel`` as the sweep names it (:data:`TUNING_KERNELS`, or an
    experiment's own name such as "fwd_pp"), ``tma`` and ``ws`` (warp specialization) booleans; the wide sweep's
    experimental TMA forward ("fwd_tma") becomes ``kernel="fwd", tma=True``. Returns {"source" (the file read),
    "n", "info", "rows", "compile_errors": [{"config", "message"}]}, or None (said why) for an unusable `path`.
    """
    found = _read(path, recorded or ("tune_h200_wide" if wide else "tune_h200"), "results")
    if found is None:
        return None
    source, data = found
    rows = []
    for r in data["results"]:
        if (not isinstance(r, dict) or not isinstance(r.get("ms"), (int, float))
                or any(k not in r for k in ("kernel", "d", "causal", "bm", "bn", "w", "s"))):
            continue                                          # a failed or malformed row: nothing to compare
        kernel = str(r["kernel"])
        rows.append({"kernel": kernel.removesuffix("_tma"), "d": int(r["d"]), "causal": bool(r["causal"]),
                     "bm": int(r["bm"]), "bn": int(r["bn"]), "w": int(r["w"]), "s": int(r["s"]),
                     "tma": kernel.endswith("_tma") or bool(r.get("tma", False)), "ws": bool(r.get("ws", False)),
                     "ms": float(r["ms"]), "err": r.get("err")})
    errors = []
    for key, message in (data.get("compile_errors") or {}).items():
        try:
            cfg = json.loads(key)
        except ValueError:
            cfg = {"config": key}
        if str(cfg.get("kernel", "")).endswith("_tma"):
            cfg = {**cfg, "kernel": cfg["kernel"].removesuffix("_tma"), "tma": True}
        errors.append({"config": cfg, "message": str(message)})
    return {"source": source, "n": data.get("n"), "info": data.get("info", {}), "rows": rows,
            "compile_errors": errors}


def _sort_key(key):
    kernel, d, causal = key[:3]
    order = TUNING_KERNELS.index(kernel) if kernel in TUNING_KERNELS else len(TUNING_KERNELS)
    return (order, kernel, d, causal) + tuple(key[3:])


def tuned_configs() -> dict:
    """The package's launch configurations (:data:`flashsim.kernels._common.TUNED_H200`, used with TMA on a
    GPU) keyed by the tuning sweep's names: {("fwd" | "dkdv" | "dq", d, causal): (BLOCK_M, BLOCK_N, warps,
    stages)} (chapter 12); {} (said why) where torch and triton are not installed."""
    why = missing("kernels")
    if why:
        print(why)
        return {}
    from flashsim.kernels._common import TUNED_H200     # lazy: flashsim.kernels imports torch and triton
    names = {v: k for k, v in _TUNED_NAMES.items()}
    return {(names[k], d, c): tuple(v) for (k, d, c), v in TUNED_H200.items() if k in names}


def tuning_summary(path=None) -> list[dict]:
    """Per (kernel, d, causal) of the pointer-vs-TMA tuning sweep (chapter 12): the best pointer-load and the best
    TMA configuration, their times, and the speedup pointer ms / TMA ms (> 1: TMA faster).

    Each row: {"kernel", "d", "causal", "pointer_ms", "pointer_config", "tma_ms", "tma_config", "speedup",
    "tuned_config" (the package's choice, :data:`flashsim.kernels._common.TUNED_H200`, or None), "tuned_tma_ms"
    (the TMA time at that configuration, if the sweep has it), "n", "source" (the file read)}; configurations are
    (BLOCK_M, BLOCK_N, num_warps, num_stages). Warp-specialized rows are left out. [] for an unusable `path`.
    """
    tuning = load_tuning(path)
    if tuning is None:
        return []
    package = tuned_configs()
    best: dict = {}
    ms_at: dict = {}
    for r in (r for r in tuning["rows"] if not r["ws"]):
        key = (r["kernel"], r["d"], r["causal"], r["tma"])
        if key not in best or r["ms"] < best[key]["ms"]:
            best[key] = r
        ms_at[key + _config(r)] = r["ms"]
    out = []
    for kernel, d, causal in sorted({k[:3] for k in best}, key=_sort_key):
        ptr, tma = best.get((kernel, d, causal, False)), best.get((kernel, d, causal, True))
        tuned = package.get((kernel, d, causal))
        out.append({"kernel": kernel, "d": d, "causal": causal,
                    "pointer_ms": ptr and ptr["ms"], "pointer_config": ptr and _config(ptr),
                    "tma_ms": tma and tma["ms"], "tma_config": tma and _config(tma),
                    "speedup": ptr["ms"] / tma["ms"] if ptr and tma else None, "tuned_config": tuned,
                    "tuned_tma_ms": ms_at.get((kernel, d, causal, True) + tuned) if tuned else None,
                    "n": tuning["n"], "source": tuning["source"]})
    return out


def tuning_table(summary=None):
    """:func:`tuning_summary` as a :class:`flashsim.course.Table` (chapter 12); None when there is nothing."""
    summary = tuning_summary() if summary is None else summary
    if not summary:
        return None
    rows = [[TUNING_KERNEL_LABELS.get(r["kernel"], r["kernel"]), r["d"], "yes" if r["causal"] else "no",
             _round(r["pointer_ms"], 3), config_label(r["pointer_config"]), _round(r["tma_ms"], 3),
             config_label(r["tma_config"]), _round(r["speedup"], 2), config_label(r["tuned_config"]),
             _round(r["tuned_tma_ms"], 3)] for r in summary]
    return Table(["kernel", "d", "causal", "pointer ms", "best pointer", "TMA ms", "best TMA", "pointer/TMA",
                  "TUNED_H200", "its TMA ms"], rows,
                 f"Best launch configuration per kernel, pointer loads vs TMA: N={summary[0]['n']}, fp16, "
                 f"median ms of do_bench ({summary[0]['source']})")


def wide_sweep_summary(path=None) -> dict | None:
    """What the wide tuning sweep (``tune_h200_wide``) says about pipelining and warp specialization (chapter 12).
    Pointer-load rows only for the stages; the experimental TMA forward's pairs for warp specialization.

    Returns {"source", "n", "configs" (timed), "best_by_stages": {(kernel, d, causal): {stages: best ms}},
    "best_stages": {(kernel, d, causal): stages of the fastest}, "shared_memory": [{"config", "required",
    "limit"}] (configurations the compiler refused for lack of shared memory), "warp_specialize": {num_warps:
    {"compiled", "failed", "message", "ratios" (ws ms / plain ms of the same configuration)}}}, or None.
    """
    tuning = load_tuning(path, wide=True)
    if tuning is None:
        return None
    by_stages: dict = {}
    plain: dict = {}
    ws: dict = {}

    def ws_cell(warps: int) -> dict:
        return ws.setdefault(warps, {"compiled": 0, "failed": 0, "message": None, "ratios": []})

    for r in tuning["rows"]:
        if not r["tma"] and not r["ws"]:
            cell = by_stages.setdefault((r["kernel"], r["d"], r["causal"]), {})
            cell[r["s"]] = min(cell.get(r["s"], float("inf")), r["ms"])
        if not r["ws"]:
            plain[(r["kernel"], r["d"], r["causal"], r["tma"]) + _config(r)] = r["ms"]
    shared = []
    for e in tuning["compile_errors"]:
        m = re.search(r"shared memory, Required: (\d+), Hardware limit: (\d+)", e["message"])
        if m:
            shared.append({"config": e["config"], "required": int(m.group(1)), "limit": int(m.group(2))})
        if e["config"].get("ws"):
            cell = ws_cell(int(e["config"].get("w", 0)))
            cell["failed"] += 1
            cell["message"] = cell["message"] or e["message"]
    for r in (r for r in tuning["rows"] if r["ws"]):
        cell = ws_cell(r["w"])
        cell["compiled"] += 1
        base = plain.get((r["kernel"], r["d"], r["causal"], r["tma"]) + _config(r))
        if base:
            cell["ratios"].append(r["ms"] / base)
    by_stages = dict(sorted(by_stages.items(), key=lambda kv: _sort_key(kv[0])))
    return {"source": tuning["source"], "n": tuning["n"], "configs": len(tuning["rows"]),
            "best_by_stages": by_stages, "best_stages": {k: min(v, key=v.get) for k, v in by_stages.items()},
            "shared_memory": shared, "warp_specialize": dict(sorted(ws.items()))}


def pipelining_table(summary=None):
    """Best time per number of pipeline stages, per kernel and shape, relative to the kernel's best (chapter 12):
    from :func:`wide_sweep_summary`. None when there is nothing."""
    summary = wide_sweep_summary() if summary is None else summary
    if not summary or not summary["best_by_stages"]:
        return None
    stages = sorted({s for v in summary["best_by_stages"].values() for s in v})
    rows = []
    for (kernel, d, causal), cell in summary["best_by_stages"].items():
        best = min(cell.values())
        rows.append([TUNING_KERNEL_LABELS.get(kernel, kernel), d, "yes" if causal else "no", round(best, 3)]
                    + [round(cell[s] / best, 3) if s in cell else None for s in stages]
                    + [summary["best_stages"][(kernel, d, causal)]])
    shared = summary["shared_memory"]
    note = ""
    if shared:
        needed = [x["required"] for x in shared]
        note = (f"; {len(shared)} configurations refused for shared memory (needed {min(needed):,}-{max(needed):,} "
                f"B, limit {shared[0]['limit']:,} B)")
    return Table(["kernel", "d", "causal", "best ms"] + [f"{s} stages (/best)" for s in stages] + ["fastest"],
                 rows, f"Pipeline stages, pointer loads, N={summary['n']}, fp16: the best over block shapes and "
                       f"warps at each stage count ({summary['source']}{note})")


def warp_specialization_table(summary=None):
    """Triton's automatic warp specialization in the wide sweep (chapter 12): per num_warps, how many
    configurations compiled, the compiler's message where they did not, and the time ratio to the same
    configuration without it. None when the sweep has no such rows."""
    summary = wide_sweep_summary() if summary is None else summary
    if not summary or not summary["warp_specialize"]:
        return None
    rows = [[w, c["compiled"] + c["failed"], c["compiled"], c["failed"], c["message"] or "—",
             round(min(c["ratios"]), 3) if c["ratios"] else None, round(max(c["ratios"]), 3) if c["ratios"] else None]
            for w, c in summary["warp_specialize"].items()]
    return Table(["num_warps", "configs", "compiled", "failed", "compiler's message", "ws/plain min",
                  "ws/plain max"], rows,
                 "tl.range(..., warp_specialize=True) in the experimental TMA forward, N="
                 f"{summary['n']}, fp16 ({summary['source']})")


def pingpong_summary(paths=None) -> list[dict]:
    """The manual ping-pong experiment (chapter 12): ``benchmarks/tune_attention.py --pingpong`` timed the package's
    forward ("fwd") against a variant that keeps two Q half-tiles per program and updates them alternately
    ("fwd_pp", so that one half's matmul might overlap the other's exponentials), both with TMA loads.

    paths None: the recorded ``tune_h200_pingpong_n<N>`` sweeps. Per (N, d, causal): {"n", "d", "causal",
    "fwd_ms", "fwd_config", "pingpong_ms", "pingpong_config", "speedup" (fwd ms / ping-pong ms: > 1 means ping-pong
    is faster), "source"}. Unusable paths are skipped (said why).
    """
    sweeps = ([load_tuning(recorded=name) for name in recorded_names() if name.startswith(_PINGPONG)]
              if paths is None else [load_tuning(path) for path in paths])
    out = []
    for tuning in filter(None, sweeps):
        best: dict = {}
        for r in (r for r in tuning["rows"] if r["kernel"] in ("fwd", "fwd_pp")):
            key = (r["kernel"], r["d"], r["causal"])
            if key not in best or r["ms"] < best[key]["ms"]:
                best[key] = r
        for d, causal in sorted({k[1:] for k in best}):
            plain, pp = best.get(("fwd", d, causal)), best.get(("fwd_pp", d, causal))
            out.append({"n": tuning["n"], "d": d, "causal": causal,
                        "fwd_ms": plain and plain["ms"], "fwd_config": plain and _config(plain),
                        "pingpong_ms": pp and pp["ms"], "pingpong_config": pp and _config(pp),
                        "speedup": plain["ms"] / pp["ms"] if plain and pp else None, "source": tuning["source"]})
    return sorted(out, key=lambda r: (r["n"] or 0, r["d"], r["causal"]))


def pingpong_table(summary=None):
    """:func:`pingpong_summary` as a :class:`flashsim.course.Table` (chapter 12); None when there is nothing."""
    summary = pingpong_summary() if summary is None else summary
    if not summary:
        return None
    rows = [[r["n"], r["d"], "yes" if r["causal"] else "no", _round(r["fwd_ms"], 3), config_label(r["fwd_config"]),
             _round(r["pingpong_ms"], 3), config_label(r["pingpong_config"]), _round(r["speedup"], 3)]
            for r in summary]
    return Table(["N", "d", "causal", "forward ms", "best config", "ping-pong ms", "best config",
                  "forward/ping-pong"], rows,
                 f"Manual ping-pong (two Q half-tiles per program) vs the package's forward, TMA, fp16, best "
                 f"configuration of each ({', '.join(sorted({r['source'] for r in summary}))})")


def speed_headline(path=None) -> dict | None:
    """The headline of the speed grid (recorded ``attention_speed_h200``, or the JSON file `path`) of
    ``benchmarks/attention_speed.py`` (chapter 12): for each target of the grid ("fwd ours/flash", ...; rows with
    N >= its ``target_min_n``) and each head dim (and all), how many rows meet it and the min / median / max ratio
    of our speed to the baseline's.

    Returns {"source", "device", "date", "min_n", "rows": [{"metric", "d" ("all" or an int), "target", "met",
    "total", "min", "median", "max"}]}, or None (said why) for an unusable `path`.
    """
    found = _read(path, "attention_speed_h200", "rows")
    if found is None:
        return None
    source, data = found
    min_n = int(data.get("target_min_n", 0))
    targets = dict(data.get("targets") or {})
    targets.setdefault("bwd ours/cudnn", None)           # no target, but worth a line: cuDNN's backward
    grid = [r for r in data["rows"] if isinstance(r, dict) and r.get("n", 0) >= min_n]
    out = []
    for metric, need in targets.items():
        mode, base = metric.split(" ours/")
        for d in ["all"] + sorted({r["d"] for r in grid}):
            ratios = [r["ratio"][base] for r in grid if r.get("mode") == mode and (d == "all" or r["d"] == d)
                      and isinstance((r.get("ratio") or {}).get(base), (int, float))]
            if ratios:
                out.append({"metric": metric, "d": d, "target": need, "total": len(ratios),
                            "met": None if need is None else sum(x >= need for x in ratios),
                            "min": min(ratios), "median": statistics.median(ratios), "max": max(ratios)})
    versions = data.get("versions", {})
    return {"source": source, "device": versions.get("gpu"), "date": versions.get("date_utc"), "min_n": min_n,
            "rows": out}


def speed_headline_table(headline=None):
    """:func:`speed_headline` as a :class:`flashsim.course.Table` (chapter 12); None when there is nothing."""
    headline = speed_headline() if headline is None else headline
    if not headline or not headline["rows"]:
        return None
    rows = [[r["metric"], r["d"], "—" if r["target"] is None else f">= {r['target']}",
             "—" if r["met"] is None else f"{r['met']}/{r['total']}", round(r["min"], 2), round(r["median"], 2),
             round(r["max"], 2)] for r in headline["rows"]]
    return Table(["speed ratio", "d", "target", "rows met", "min", "median", "max"], rows,
                 f"{headline['device'] or 'GPU'}, {headline['date'] or ''}: our speed / PyTorch SDPA backend's, rows "
                 f"with N >= {headline['min_n']} (fp16 and bf16, causal or not) ({headline['source']})")
