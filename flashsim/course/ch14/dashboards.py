"""Chapter 14 dashboards and tables: the course's kernels at full speed on a Hopper GPU, from recorded results.

Two parts, as in the notebook:

- **What the Triton kernel of chapters 05-12 already gets** on an H200, from the recorded tuning sweeps and speed
  grid (:mod:`flashsim.course.kit.results`): :func:`load_tuning`, :func:`tuned_configs`, :func:`tuning_summary` /
  :func:`tuning_table` (pointer loads vs TMA), :func:`wide_sweep_summary` with :func:`pipelining_table` and
  :func:`warp_specialization_table`, :func:`pingpong_summary` / :func:`pingpong_table` (a manual ping-pong in
  Triton), :func:`speed_headline` / :func:`speed_headline_table` (the speed grid against PyTorch SDPA's backends).
- **What the Gluon kernel adds** (:mod:`flashsim.kernels.gluon`), from its recorded run, where cuDNN, SDPA's
  FlashAttention-2 backend, the course's Triton forward and the Gluon forward were timed one after another on the
  same inputs: :func:`load_gluon` (and :func:`load_gluon_backward`), :func:`gluon_speed_table` (the one table of
  measured numbers), :func:`gluon_summary_table`, :func:`gluon_headline` / :func:`gluon_headline_text` (the counts
  the chapter's text gives, written from the data), :func:`gluon_misses_table`, :func:`gluon_ablation` /
  :func:`gluon_ablation_table` / :func:`gluon_ablation_summary_table` (each switch of :data:`GLUON_ABLATIONS`, timed
  off beside the default) and :func:`feature_table` (the ablation as measured),
  :func:`warp_roles_table` and :func:`ring_protocol_table` (the kernel's roles and barriers),
  :func:`persistent_tile_order` and :func:`warp_schedule` (its tile order, and a picture of its warp roles, from
  :mod:`flashsim.course.ch14.schedule`), :func:`gluon_io` / :func:`gluon_io_table` (the kernel view of its
  TMA copies), :func:`gluon_dram_model` and :func:`gluon_ncu_io` (the L2 model's DRAM bytes and ncu's, recorded),
  :class:`GluonSpeedDashboard` and :func:`measure_here` (the same comparison on this machine's GPU).

Every loader also reads a JSON file of the same kind (``path=``), e.g. a learner's own GPU run; an unusable file is
said so and gives None or []. Captions say "recorded" for the shipped results and the file's path otherwise.
"""
from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

from flashsim.course.ch14.figures import GluonSpeedPlot
from flashsim.course.ch14.schedule import persistent_tile_order, warp_schedule
from flashsim.course.kit.dashboard import Dashboard, choice, toggle
from flashsim.course.kit.optional import missing
from flashsim.course.kit.results import load_result, recorded_names, result_source
from flashsim.errors import FlashsimError
from flashsim.kernels.gluon import forward_config, fwd_smem_bytes     # configuration rules only: nothing heavy
from flashsim.model.attention.reference import reference_attention
from flashsim.model.attention.visibility import n_blocks, visible_col_blocks
from flashsim.model.kernel_io import kernel_dram, kernel_io
from flashsim.model.table import Table

__all__ = ["GluonSpeedDashboard", "GLUON_KERNELS", "GLUON_KERNEL_LABELS", "GLUON_TARGETS", "GLUON_ABLATIONS",
           "load_gluon", "load_gluon_backward", "gluon_rows", "gluon_speed_table", "gluon_summary",
           "gluon_summary_table", "gluon_headline", "gluon_headline_text", "gluon_misses_table", "gluon_ablation",
           "gluon_ablation_table", "gluon_ablation_summary", "gluon_ablation_summary_table", "pingpong_ablation",
           "pingpong_ablation_table", "feature_table", "warp_roles_table", "ring_protocol_table",
           "persistent_tile_order", "warp_schedule", "gluon_io", "gluon_io_table", "gluon_dram_model", "gluon_ncu_io",
           "measure_here",
           # part 1 (moved here from chapter 12)
           "TUNING_KERNELS", "TUNING_KERNEL_LABELS", "config_label", "load_tuning", "tuned_configs", "tuning_summary",
           "tuning_table", "wide_sweep_summary", "pipelining_table", "warp_specialization_table", "pingpong_summary",
           "pingpong_table", "speed_headline", "speed_headline_table"]


def _recorded_label(source: str) -> str:
    """What a caption says about where numbers come from: "recorded on an H200" for a shipped result, else the
    file's path (a learner's own run)."""
    shipped = {result_source(name) for name in recorded_names()}
    return "recorded" if source in shipped else source


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


def _round(x, digits: int):
    return None if x is None else round(x, digits)


def _span(values, digits: int = 2) -> str:
    """"lo–hi" of some numbers ("—" for none)."""
    values = [v for v in values if v is not None]
    if not values:
        return "—"
    lo, hi = min(values), max(values)
    return f"{lo:.{digits}f}" if round(lo, digits) == round(hi, digits) else f"{lo:.{digits}f}–{hi:.{digits}f}"


# --- part 1: what the Triton kernel already gets (the recorded tuning sweeps and speed grid) ---------------------

#: the tuning sweep's kernel names (benchmarks/tune_attention.py), in the order tables list them
TUNING_KERNELS = ("fwd", "dkdv", "dq", "atomic")
#: what each of them is
TUNING_KERNEL_LABELS = {"fwd": "forward", "dkdv": "bwd K/V pass", "dq": "bwd dQ pass",
                        "atomic": "bwd one pass (atomic dQ)"}
#: the tuning sweep's kernel names -> the kernel names of flashsim.kernels._common.TUNED_H200
_TUNED_NAMES = {"fwd": "flash_fwd", "dkdv": "flash_bwd_dkdv", "dq": "flash_bwd_dq"}
#: recorded names (flashsim/course/recorded/manifest.json) of the ping-pong experiment, one per N
_PINGPONG = "tune_h200_pingpong_n"


def _config(r: dict) -> tuple:
    return (r["bm"], r["bn"], r["w"], r["s"])


def config_label(config) -> str:
    """(BLOCK_M, BLOCK_N, num_warps, num_stages) as "64×128 w4 s2" (chapter 14's tables)."""
    if not config:
        return "—"
    bm, bn, w, s = config
    return f"{bm}×{bn} w{w} s{s}"


def load_tuning(path=None, wide: bool = False, recorded: str | None = None) -> dict | None:
    """A tuning sweep of ``benchmarks/tune_attention.py`` (chapter 14): every kernel timed alone, fp16.

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
    stages)} (chapter 14). {} (said why) where torch and triton are not installed."""
    why = missing("kernels")
    if why:
        print(why)
        return {}
    from flashsim.kernels._common import TUNED_H200     # lazy: flashsim.kernels._common imports torch and triton
    names = {v: k for k, v in _TUNED_NAMES.items()}
    return {(names[k], d, c): tuple(v) for (k, d, c), v in TUNED_H200.items() if k in names}


def tuning_summary(path=None) -> list[dict]:
    """Per (kernel, d, causal) of the pointer-vs-TMA tuning sweep (chapter 14): the best pointer-load and the best
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
    """:func:`tuning_summary` as a :class:`flashsim.course.Table` (chapter 14); None when there is nothing."""
    summary = tuning_summary() if summary is None else summary
    if not summary:
        return None
    rows = [[TUNING_KERNEL_LABELS.get(r["kernel"], r["kernel"]), r["d"], "yes" if r["causal"] else "no",
             _round(r["pointer_ms"], 3), config_label(r["pointer_config"]), _round(r["tma_ms"], 3),
             config_label(r["tma_config"]), _round(r["speedup"], 2), config_label(r["tuned_config"]),
             _round(r["tuned_tma_ms"], 3)] for r in summary]
    return Table(["kernel", "d", "causal", "pointer ms", "best pointer", "TMA ms", "best TMA", "pointer/TMA",
                  "the package's choice", "its TMA ms"], rows,
                 f"Best launch configuration per kernel, pointer loads vs TMA: N={summary[0]['n']}, fp16, "
                 f"median ms of do_bench ({_recorded_label(summary[0]['source'])})")


def wide_sweep_summary(path=None) -> dict | None:
    """What the wide tuning sweep (``tune_h200_wide``) says about pipelining and warp specialization (chapter 14).
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
    """Best time per number of pipeline stages, per kernel and shape, relative to the kernel's best (chapter 14):
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
        note = (f"; {len(shared)} configurations did not fit in shared memory (needed {min(needed) / 1024:,.0f}-"
                f"{max(needed) / 1024:,.0f} KiB, limit {shared[0]['limit'] / 1024:,.0f} KiB per block)")
    return Table(["kernel", "d", "causal", "best ms"] + [f"{s} stages (/best)" for s in stages] + ["fastest"],
                 rows, f"Pipeline stages, pointer loads, N={summary['n']}, fp16: the best over block shapes and "
                       f"warps at each stage count ({_recorded_label(summary['source'])}{note})")


def warp_specialization_table(summary=None):
    """Triton's automatic warp specialization in the wide sweep (chapter 14): per num_warps, how many
    configurations compiled, and the time ratio to the same configuration without it. None when the sweep has no
    such rows. (The compiler's messages stay in ``wide_sweep_summary()["warp_specialize"]``.)"""
    summary = wide_sweep_summary() if summary is None else summary
    if not summary or not summary["warp_specialize"]:
        return None
    rows = [[w, c["compiled"] + c["failed"], c["compiled"], c["failed"],
             round(min(c["ratios"]), 3) if c["ratios"] else None, round(max(c["ratios"]), 3) if c["ratios"] else None]
            for w, c in summary["warp_specialize"].items()]
    return Table(["num_warps", "configs", "compiled", "did not compile", "ws/plain min", "ws/plain max"], rows,
                 "tl.range(..., warp_specialize=True) in an experimental TMA forward, N="
                 f"{summary['n']}, fp16 ({_recorded_label(summary['source'])})")


def pingpong_summary(paths=None) -> list[dict]:
    """The manual ping-pong experiment in Triton (chapter 14): the package's forward ("fwd") against a variant that
    keeps two Q half-tiles per program and updates them alternately ("fwd_pp", so that one half's matmul might
    overlap the other's exponentials), both with TMA loads.

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
    """:func:`pingpong_summary` as a :class:`flashsim.course.Table` (chapter 14); None when there is nothing."""
    summary = pingpong_summary() if summary is None else summary
    if not summary:
        return None
    rows = [[r["n"], r["d"], "yes" if r["causal"] else "no", _round(r["fwd_ms"], 3), config_label(r["fwd_config"]),
             _round(r["pingpong_ms"], 3), config_label(r["pingpong_config"]), _round(r["speedup"], 3)]
            for r in summary]
    sources = sorted({_recorded_label(r["source"]) for r in summary})
    return Table(["N", "d", "causal", "forward ms", "best config", "ping-pong ms", "best config",
                  "forward/ping-pong"], rows,
                 f"Manual ping-pong in Triton (two Q half-tiles per program) vs the package's forward, TMA, fp16, "
                 f"best configuration of each ({', '.join(sources)})")


def speed_headline(path=None) -> dict | None:
    """The headline of the speed grid (recorded ``attention_speed_h200``, or the JSON file `path`) of
    ``benchmarks/attention_speed.py`` (chapter 14): for each target of the grid ("fwd ours/flash", ...; rows with
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


#: the speed grid's baseline names -> SDPA's backends, named
_SDPA_BACKENDS = {"flash": "SDPA FlashAttention-2", "cudnn": "SDPA cuDNN", "efficient": "SDPA memory-efficient",
                  "math": "SDPA math"}


def speed_headline_table(headline=None, mode: str | None = None):
    """:func:`speed_headline` as a :class:`flashsim.course.Table` (chapter 14), the baselines named as SDPA's
    backends; ``mode="fwd"`` or ``"bwd"`` keeps one pass. None when there is nothing."""
    headline = speed_headline() if headline is None else headline
    if not headline or not headline["rows"]:
        return None
    rows = []
    for r in headline["rows"]:
        kind, base = r["metric"].split(" ours/")
        if mode is not None and kind != mode:
            continue
        rows.append([{"fwd": "forward", "bwd": "backward"}.get(kind, kind), _SDPA_BACKENDS.get(base, base), r["d"],
                     "—" if r["target"] is None else f">= {r['target']}",
                     "—" if r["met"] is None else f"{r['met']}/{r['total']}", round(r["min"], 2),
                     round(r["median"], 2), round(r["max"], 2)])
    if not rows:
        return None
    return Table(["pass", "against", "d", "target", "rows met", "min", "median", "max"], rows,
                 f"{headline['device'] or 'GPU'}: the course's Triton kernels' speed / the SDPA backend's, rows with "
                 f"N >= {headline['min_n']} (fp16 and bf16, causal or not) ({_recorded_label(headline['source'])})")


# --- part 2: the Gluon kernel (flashsim.kernels.gluon), from its recorded run ------------------------------------

#: the kernels of the Gluon run, in the order the tables list them
GLUON_KERNELS = ("cudnn", "flash", "triton", "gluon")
#: what each of them is (SDPA's backends named)
GLUON_KERNEL_LABELS = {"cudnn": "SDPA cuDNN", "flash": "SDPA FlashAttention-2", "triton": "course Triton",
                       "gluon": "course Gluon"}
_GLUON = "gluon_fwd_h200"
#: the correctness grid run in the same call as the recorded timing run (its checks, where the run has none)
_GLUON_GRID = "gluon_grid_h200"
_DTYPES = {"float16": "fp16", "bfloat16": "bf16", "fp16": "fp16", "bf16": "bf16"}
#: query rows of one consumer warpgroup, and the keys per K/V tile, in every configuration of the Gluon forward
GLUON_ROWS_PER_CONSUMER = 64
#: the targets of the Gluon kernels against cuDNN (speed / speed): forward, backward
GLUON_TARGETS = {"forward": 1.0, "backward": 0.9}


def _timings(raw: dict, suffix: str) -> dict:
    """{name: {"ms", "rounds" (each round's ms, or None), "tflops"}} of every kernel a recorded row timed: keys
    NAME{suffix}_ms (a --bwd run's forward: suffix "_fwd"; its backward: "", the forward's keys left out)."""
    out = {}
    for key, value in raw.items():
        if not key.endswith(f"{suffix}_ms") or not isinstance(value, (int, float)) or key.endswith("_rounds_ms"):
            continue
        name = key[:-len(f"{suffix}_ms")]
        if not name or (not suffix and name.endswith("_fwd")):
            continue
        rounds = raw.get(f"{name}{suffix}_rounds_ms")
        out[name] = {"ms": float(value), "rounds": list(rounds) if isinstance(rounds, list) else None,
                     "tflops": raw.get(f"{name}{suffix}_tflops")}
    return out


def _normalise_row(raw: dict, suffix: str, pre: str, kernels) -> dict:
    timed = _timings(raw, suffix)
    return {"dtype": _DTYPES.get(raw["dtype"], raw["dtype"]), "d": int(raw["d"]), "causal": bool(raw["causal"]),
            "n": int(raw["N"]), "batch": int(raw["B"]), "heads": int(raw["H"]),
            "correct": bool(raw.get(f"{pre}correct")), "err": raw.get(f"{pre}err"),
            "err_torch": raw.get(f"{pre}err_torch"),
            "ms": {k: timed[k]["ms"] for k in kernels if k in timed},
            "tflops": {k: float(timed[k]["tflops"]) for k in kernels if k in timed
                       and isinstance(timed[k]["tflops"], (int, float))},
            "timed": timed}


def load_gluon(path=None, grid=None) -> dict | None:
    """The Gluon forward's recorded run (``gluon_fwd_h200``), or a JSON file of the same kind (a learner's own run
    of ``benchmarks/gluon_validate.py``), normalised (chapter 14). Both kinds of run are read: the forward's own
    (``gluon_validate.py``: row keys ``cudnn_ms``, ...) and the forward timed beside the backward on the same inputs
    (``gluon_validate.py --bwd``: row keys ``cudnn_fwd_ms``, ..., ``fwd_correct``). A run timed in interleaved
    rounds (``--rounds``) keeps each round's times: every ratio of the chapter is then the median of the per-round
    ratios, as the run computed its own.

    The correctness cases come from the run's ``checks``; where it has none (``--grid none``) from `grid` (a JSON
    file of a ``--no-timing`` grid run), or for the recorded run from the grid run beside it (``gluon_grid_h200``).

    Returns {"source", "device", "sms", "versions", "rounds" (timing rounds per row, or None), "checks": {"passed",
    "total" (the forward's correctness cases), "bwd_passed", "bwd_total" (the backward's), "not_run" (other checks
    that raised before a verdict)}, "configs": {(d, causal): {"NC", "BLOCK_N", "STAGES", "CONSUMER_REGS",
    "PINGPONG", ...}}, "rows": [...]}; each row {"dtype" ("fp16" | "bf16"), "d", "causal", "n", "batch", "heads",
    "correct", "err", "err_torch", "ms": {kernel: ms}, "tflops": {kernel: TFLOP/s}, "timed": {name: {"ms",
    "rounds", "tflops"}} (every kernel the row timed: :data:`GLUON_KERNELS`, ``gluon_no_pingpong``,
    ``gluon_committed`` (a feature switched off, ``--fwd-beside``)), "no_pingpong_ms", "no_pingpong_tflops" (None
    where not timed), "pingpong" (whether the row's configuration had ping-pong on: the run's configurations and
    their overrides by N; None where the run does not say), "config", "beside_config" (the configuration timed as
    ``gluon_committed``, or None)}. None (said why) for an unusable `path`.
    """
    found = _read(path, _GLUON, "rows")
    if found is None:
        return None
    source, data = found
    rows = []
    for r in data["rows"]:
        if not isinstance(r, dict):
            continue
        fx = "_fwd" if "gluon_fwd_ms" in r else ""                 # a --bwd run: the forward's keys end in _fwd
        pre = "fwd_" if fx else ""                                  # ... and its checks start with fwd_
        if any(not isinstance(r.get(f"{k}{fx}_ms"), (int, float)) for k in GLUON_KERNELS):
            continue
        row = _normalise_row(r, fx, pre, GLUON_KERNELS)
        off = row["timed"].get("gluon_no_pingpong", {})
        row.update(no_pingpong_ms=off.get("ms"), no_pingpong_tflops=off.get("tflops"),
                   config=dict(r.get(f"{pre}config") or {}), beside_config=r.get(f"{pre}committed_config"))
        rows.append(row)
    configs = {key: dict(cfg) for key, cfg in _by_config_key(data.get("configs")).items()}
    by_n = {key: [tuple(x) for x in ranges] for key, ranges in _by_config_key(data.get("configs_by_n")).items()}
    for r in rows:
        r["pingpong"] = _recorded_pingpong(configs, by_n, r["d"], r["causal"], r["n"])
    checks = [c for c in data.get("checks") or [] if isinstance(c, dict)]
    if not checks:
        beside = _read(grid, _GLUON_GRID, "checks") if grid is not None or path is None else None
        checks = [c for c in (beside[1].get("checks") if beside else None) or [] if isinstance(c, dict)]
    # the forward's correctness cases (a --bwd run marks each case "fwd" or "bwd")
    forward = [c for c in checks if "N" in c and c.get("what", "fwd") == "fwd"]
    backward = [c for c in checks if "N" in c and c.get("what") == "bwd"]
    not_run = [c for c in checks if "N" not in c and c.get("error")]     # checks that raised before a verdict
    versions = dict(data.get("versions") or {})
    return {"source": source, "device": versions.get("gpu"), "sms": versions.get("sms"), "versions": versions,
            "rounds": data.get("rounds"),
            "checks": {"passed": sum(bool(c.get("ok")) for c in forward), "total": len(forward),
                       "bwd_passed": sum(bool(c.get("ok")) for c in backward), "bwd_total": len(backward),
                       "not_run": len(not_run)},
            "configs": configs, "rows": rows}


def load_gluon_backward(path=None, recorded: str = "gluon_bwd_h200") -> dict | None:
    """The backward of a Gluon ``--bwd`` run (chapter 14): the recorded ``gluon_bwd_h200`` by default, another
    recorded run by name (`recorded`, e.g. ``gluon_bwd_block_h200``), or a JSON file of the same kind (`path`).

    Returns {"source", "device", "rounds", "configs": {(d, causal): the backward's configuration}, "rows": [{"dtype",
    "d", "causal", "n", "batch", "heads", "correct", "err", "err_torch", "ms", "tflops" (the kernels of
    :data:`GLUON_KERNELS` the row timed: the Triton backward only where it was), "timed" (every kernel timed,
    e.g. ``gluon_committed_full``: another configuration through the whole ``flash_backward`` path)}]}; None (said
    why) for an unusable `path`."""
    found = _read(path, recorded, "rows")
    if found is None:
        return None
    source, data = found
    rows = [_normalise_row(r, "", "", GLUON_KERNELS) for r in data["rows"] if isinstance(r, dict)
            and all(isinstance(r.get(f"{k}_ms"), (int, float)) for k in ("cudnn", "gluon"))]
    versions = dict(data.get("versions") or {})
    return {"source": source, "device": versions.get("gpu"), "rounds": data.get("rounds"),
            "configs": {key: dict(cfg) for key, cfg in _by_config_key(data.get("bwd_configs")).items()},
            "rows": rows}


def _by_config_key(table) -> dict:
    """A recorded run's {"d64_causal1": value, ...} as {(64, True): value, ...} (other keys left out)."""
    out = {}
    for key, value in (table or {}).items():
        m = re.fullmatch(r"d(\d+)_causal([01])", key)
        if m:
            out[(int(m.group(1)), m.group(2) == "1")] = value
    return out


def _recorded_pingpong(configs: dict, by_n: dict, d: int, causal: bool, n: int):
    """PINGPONG of the forward configuration a run recorded for (d, causal) at N (``configs`` and its overrides by
    N, through :func:`flashsim.kernels.gluon.forward_config`), or None when the run does not record it."""
    if "PINGPONG" not in configs.get((d, causal), {}):
        return None
    return bool(forward_config(d, causal, n, configs=configs, by_n=by_n)["PINGPONG"])


def gluon_rows(results=None, dtype: str | None = None, d: int | None = None, causal: bool | None = None) -> list:
    """The rows of :func:`load_gluon` (or `results`) for one dtype / head dim / mask (None: all)."""
    results = load_gluon() if results is None else results
    if not results:
        return []
    return [r for r in results["rows"] if (dtype is None or r["dtype"] == _DTYPES.get(dtype, dtype))
            and (d is None or r["d"] == d) and (causal is None or r["causal"] == bool(causal))]


def _time_ratios(r: dict, num: str, den: str) -> list:
    """num's time / den's time in row `r`, per timing round where both were timed in rounds, else the one ratio
    of their times ([] where the row did not time both)."""
    timed = r.get("timed") or {k: {"ms": ms, "rounds": None} for k, ms in r["ms"].items()}
    a, b = timed.get(num), timed.get(den)
    if not a or not b:
        return []
    rounds = [x / y for x, y in zip(a["rounds"] or (), b["rounds"] or ()) if x is not None and y is not None]
    return rounds or [a["ms"] / b["ms"]]


def _ratio(r: dict, a: str, b: str) -> float | None:
    """Speed of kernel `a` / speed of kernel `b` in row `r` (b's time / a's): the median over the row's timing
    rounds of the per-round ratio, as the run computed its own (one ratio of median times in a run without
    rounds); None where the row did not time both."""
    ratios = _time_ratios(r, b, a)
    return statistics.median(ratios) if ratios else None


def gluon_speed_table(results=None, dtype: str | None = None, d: int | None = None, causal: bool | None = None):
    """THE table of measured forward speeds (chapter 14): per row of the Gluon run, TFLOP/s of cuDNN and
    FlashAttention-2 (both through PyTorch SDPA, each backend forced), the course's Triton forward and its Gluon
    forward, all timed on the same inputs (in interleaved rounds where the run has them), and the speed ratios,
    with the range of Gluon/cuDNN over the rounds. None when there is nothing."""
    results = load_gluon() if results is None else results
    rows = gluon_rows(results, dtype, d, causal)
    if not rows:
        return None
    body = [[r["dtype"], r["d"], "yes" if r["causal"] else "no", r["n"], f"{r['batch']}×{r['heads']}"]
            + [round(r["tflops"][k]) for k in GLUON_KERNELS]
            + [round(_ratio(r, "gluon", "cudnn"), 2), _span(_time_ratios(r, "cudnn", "gluon")),
               round(_ratio(r, "gluon", "flash"), 2), round(_ratio(r, "gluon", "triton"), 2),
               round(_ratio(r, "triton", "cudnn"), 2), "yes" if _ratio(r, "gluon", "cudnn") >= 1.0 else "no"]
            for r in rows]
    header = (["dtype", "d", "causal", "N", "B×H"] + [f"{GLUON_KERNEL_LABELS[k]} TFLOP/s" for k in GLUON_KERNELS]
              + ["Gluon/cuDNN", "its rounds", "Gluon/FA-2", "Gluon/Triton", "Triton/cuDNN", "Gluon >= cuDNN"])
    rounds = results.get("rounds")
    how = (f"{rounds} interleaved rounds per row, each kernel once per round; ratios: the median of the per-round "
           f"ratios" if rounds else "ratios of the median times")
    return Table(header, body,
                 f"Forward, {results['device'] or 'GPU'}, one run, every kernel timed on the same inputs (do_bench; "
                 f"{how}; FLOPs 4·B·H·N²·d, half of it causal); ratios: speed / speed "
                 f"({_recorded_label(results['source'])})")


def gluon_summary(results=None) -> list[dict]:
    """Per (d, causal) (both dtypes) and for all rows: how many rows the Gluon forward is at least as fast as cuDNN,
    and the ranges of its ratios to cuDNN, FlashAttention-2 and the Triton kernel, and of the Triton kernel's to
    cuDNN and FlashAttention-2 (chapter 14). [] when there is nothing."""
    results = load_gluon() if results is None else results
    if not results or not results["rows"]:
        return []
    groups = sorted({(r["d"], r["causal"]) for r in results["rows"]}) + [("all", None)]
    out = []
    for d, causal in groups:
        rows = gluon_rows(results) if d == "all" else gluon_rows(results, d=d, causal=causal)
        ratios = {pair: [_ratio(r, *pair) for r in rows] for pair in
                  (("gluon", "cudnn"), ("gluon", "flash"), ("gluon", "triton"), ("triton", "cudnn"),
                   ("triton", "flash"))}
        out.append({"d": d, "causal": causal, "rows": len(rows),
                    "met": sum(x >= GLUON_TARGETS["forward"] for x in ratios[("gluon", "cudnn")]),
                    "ratios": ratios})
    return out


def gluon_summary_table(results=None):
    """:func:`gluon_summary` as a :class:`flashsim.course.Table` (chapter 14); None when there is nothing."""
    results = load_gluon() if results is None else results
    summary = gluon_summary(results)
    if not summary:
        return None
    rows = [[s["d"], "—" if s["causal"] is None else ("yes" if s["causal"] else "no"), f"{s['met']}/{s['rows']}"]
            + [_span(s["ratios"][pair]) for pair in (("gluon", "cudnn"), ("triton", "cudnn"), ("gluon", "flash"),
                                                     ("triton", "flash"), ("gluon", "triton"))]
            for s in summary]
    n = sorted({r["n"] for r in results["rows"]})
    return Table(["d", "causal", "Gluon >= cuDNN", "Gluon/cuDNN", "Triton/cuDNN", "Gluon/FA-2", "Triton/FA-2",
                  "Gluon/Triton"], rows,
                 f"Forward speed ratios (speed / speed), fp16 and bf16, N = {n[0]:,}-{n[-1]:,}, "
                 f"{results['device'] or 'GPU'}, the same run as the full table ({_recorded_label(results['source'])})")


def _counts(rows: list, a: str, b: str, target: float) -> dict:
    """Over `rows` that timed both: how many, how many with speed a / speed b >= target (median over rounds), in
    every round and in none, and the median's range."""
    rows = [r for r in rows if _time_ratios(r, b, a)]
    med = [_ratio(r, a, b) for r in rows]
    per = [_time_ratios(r, b, a) for r in rows]                           # speed a / speed b, per round
    return {"rows": len(rows), "met": sum(x >= target for x in med),
            "every_round": sum(min(p) >= target for p in per), "no_round": sum(max(p) < target for p in per),
            "min": min(med) if med else None, "max": max(med) if med else None}


def gluon_headline(results=None, backward=None) -> dict:
    """The counts the chapter's text gives, from the Gluon run (`results`, default :func:`load_gluon`) and its
    backward (`backward`, default :func:`load_gluon_backward`): {"forward": {"vs_cudnn", "vs_triton", "vs_flash",
    "triton_vs_cudnn", "triton_vs_flash"}, "backward": {"vs_cudnn", "vs_triton", "vs_flash"}, "targets", "rounds"};
    each entry {"rows", "met" (rows at the target: the forward's 1.0x and backward's 0.9x against cuDNN, 1.0x
    against the others), "every_round", "no_round", "min", "max"} (:func:`_counts`). {} when there is nothing."""
    results = load_gluon() if results is None else results
    backward = load_gluon_backward() if backward is None else backward
    if not results or not results["rows"]:
        return {}
    fwd, bwd = results["rows"], (backward or {}).get("rows") or []
    tf, tb = GLUON_TARGETS["forward"], GLUON_TARGETS["backward"]
    return {"targets": dict(GLUON_TARGETS), "rounds": results.get("rounds"),
            "forward": {"vs_cudnn": _counts(fwd, "gluon", "cudnn", tf),
                        "vs_triton": _counts(fwd, "gluon", "triton", 1), "vs_flash": _counts(fwd, "gluon", "flash", 1),
                        "triton_vs_cudnn": _counts(fwd, "triton", "cudnn", 1),
                        "triton_vs_flash": _counts(fwd, "triton", "flash", 1)},
            "backward": {"vs_cudnn": _counts(bwd, "gluon", "cudnn", tb),
                         "vs_triton": _counts(bwd, "gluon", "triton", 1),
                         "vs_flash": _counts(bwd, "gluon", "flash", 1)}}


def _x(v) -> str:
    return f"{v:.2f}×"


def gluon_headline_text(part: str = "forward", headline=None) -> str:
    """The chapter's sentences with numbers in them, written from :func:`gluon_headline` so that they say what the
    recorded run says (chapter 14): ``part`` "forward" (the overview), "backward", "misses" or "takeaway"."""
    h = gluon_headline() if headline is None else headline
    if not h:
        return "no Gluon run to summarise"
    f, b = h["forward"], h["backward"]
    g, t = f["vs_cudnn"], f["triton_vs_cudnn"]
    rounds = (f" (median of {h['rounds']} interleaved rounds; in every round in {g['every_round']} of them, in no "
              f"round in {g['no_round']})" if h.get("rounds") else "")
    if part == "forward":
        return (f"Triton against cuDNN: at least as fast in {t['met']} of the {t['rows']} rows, "
                f"{_x(t['min'])}–{_x(t['max'])}; against FlashAttention-2 {_x(f['triton_vs_flash']['min'])} or "
                f"more in every row.\n"
                f"Gluon against cuDNN: at least as fast in {g['met']} of the {g['rows']} rows{rounds}, "
                f"{_x(g['min'])}–{_x(g['max'])}, so within {1 - g['min']:.0%} in every row; against "
                f"FlashAttention-2 {_x(f['vs_flash']['min'])} or more; faster than the Triton kernel in "
                f"{f['vs_triton']['met']} of {f['vs_triton']['rows']} rows ({_x(f['vs_triton']['min'])}–"
                f"{_x(f['vs_triton']['max'])}).")
    if part == "backward":
        c, tr = b["vs_cudnn"], b["vs_triton"]
        if not c["rows"]:
            return "no backward rows in this run"
        return (f"Gluon backward against cuDNN's: {_x(c['min'])}–{_x(c['max'])}, at least "
                f"{h['targets']['backward']}× (the target) in {c['met']} of the {c['rows']} rows; against "
                f"FlashAttention-2's {_x(b['vs_flash']['min'])} or more; against the course's Triton backward "
                f"{_x(tr['min'])}–{_x(tr['max'])} in the {tr['rows']} rows where both were timed.")
    if part == "misses":
        return (f"At least as fast as cuDNN in {g['met']} of the {g['rows']} rows{rounds}; "
                f"{g['rows'] - g['met']} rows miss, the table below lists them.")
    if part == "takeaway":
        c = b["vs_cudnn"]
        return (f"Forward: faster than the Triton kernel in {f['vs_triton']['met']} of {f['vs_triton']['rows']} "
                f"rows, at least as fast as cuDNN in {g['met']} of {g['rows']} ({_x(g['min'])}–{_x(g['max'])}). "
                f"Backward: {_x(c['min'])}–{_x(c['max'])} cuDNN's, {h['targets']['backward']}× or more in "
                f"{c['met']} of {c['rows']} rows.")
    raise FlashsimError(f"part={part!r}: one of 'forward', 'backward', 'misses', 'takeaway'")


def gluon_misses_table(results=None):
    """The rows where the Gluon forward is slower than cuDNN (chapter 14): its ratio (median over rounds), the
    rounds' range, and the configuration's ping-pong. None when there is none (or nothing)."""
    results = load_gluon() if results is None else results
    rows = [r for r in gluon_rows(results) if _ratio(r, "gluon", "cudnn") < GLUON_TARGETS["forward"]]
    if not rows:
        return None
    return Table(["dtype", "d", "causal", "N", "Gluon/cuDNN", "its rounds", "ping-pong"],
                 [[r["dtype"], r["d"], "yes" if r["causal"] else "no", r["n"], round(_ratio(r, "gluon", "cudnn"), 3),
                   _span(_time_ratios(r, "cudnn", "gluon")),
                   {True: "on", False: "off", None: "—"}[r["pingpong"]]] for r in rows],
                 f"The {len(rows)} rows where the Gluon forward is slower than cuDNN "
                 f"({_recorded_label(results['source'])})")


# --- the ablation: each switch that was measured, timed beside the default in one run --------------------------

#: every switch of the Gluon kernels that a recorded run timed beside the default: name -> {"feature", "pass"
#: ("forward" | "backward"), "recorded" (the run, by its recorded name), "on" / "off" (the timed kernels' names in
#: its rows), "off_label" (what runs instead), "keep" (which rows measure it: (row, run) -> bool)}
GLUON_ABLATIONS = {
    "pingpong": {
        "feature": "ping-pong between consumers", "pass": "forward", "recorded": _GLUON,
        "on": "gluon", "off": "gluon_no_pingpong", "off_label": "ping-pong off",
        # where the configuration has it off already, the two timings are of one kernel
        "keep": lambda r, run: r.get("pingpong") is not False},
    "balanced": {
        "feature": "balanced tile lists (causal tiles dealt to CTAs longest first)", "pass": "forward",
        "recorded": _GLUON, "on": "gluon", "off": "gluon_committed", "off_label": "the fixed stride",
        "keep": lambda r, run: (bool((r.get("config") or {}).get("BALANCED"))
                                and (r.get("beside_config") or {}).get("BALANCED") is False)},
    "bwd_block": {
        "feature": "128-row query blocks at d=64", "pass": "backward", "recorded": "gluon_bwd_block_h200",
        "on": "gluon", "off": "gluon_committed_full", "off_label": "64-row blocks",
        "keep": lambda r, run: r["d"] == 64 and run["configs"].get((64, r["causal"]), {}).get("BLOCK_M") == 128},
    "lse_smem": {
        "feature": "L and δ through shared memory", "pass": "backward",
        "recorded": "gluon_bwd_lse_smem_h200", "on": "gluon", "off": "gluon_committed_full",
        "off_label": "L and δ loaded per block",
        "keep": lambda r, run: run["configs"].get((r["d"], r["causal"]), {}).get("LSE_SMEM") is True},
}


def _ablation_spec(name: str) -> dict:
    if name not in GLUON_ABLATIONS:
        raise FlashsimError(f"no ablation {name!r}: the recorded runs measured {', '.join(GLUON_ABLATIONS)}")
    return GLUON_ABLATIONS[name]


def _ablation_run(name: str, results=None):
    spec = _ablation_spec(name)
    if results is not None:
        return results
    if spec["pass"] == "forward":
        return load_gluon()
    return load_gluon_backward(recorded=spec["recorded"])


def gluon_ablation(name: str, results=None) -> list[dict]:
    """One switch of the Gluon kernels, as measured (chapter 14): the kernel with feature `name` of
    :data:`GLUON_ABLATIONS` switched off, timed beside the default in the same run (`results`: that run, as
    :func:`load_gluon` or :func:`load_gluon_backward` reads it; default its recorded run). Per row that measures
    it: {"dtype", "d", "causal", "n", "on_ms", "off_ms", "speedup" (time off / time on, the median over the row's
    rounds: > 1 means the feature makes the kernel faster), "rounds_min", "rounds_max" (that ratio's range over the
    rounds; None in a run without rounds), "change" (speed off / speed on - 1: > 0 means faster without it)}. []
    for a run without such rows."""
    spec = _ablation_spec(name)
    run = _ablation_run(name, results)
    out = []
    for r in (run or {}).get("rows") or []:
        per = _time_ratios(r, spec["off"], spec["on"])
        if not per or not spec["keep"](r, run):
            continue
        speedup = statistics.median(per)
        rounds = len(per) > 1                                  # a run without rounds: one ratio, no range
        out.append({"dtype": r["dtype"], "d": r["d"], "causal": r["causal"], "n": r["n"],
                    "on_ms": r["timed"][spec["on"]]["ms"], "off_ms": r["timed"][spec["off"]]["ms"],
                    "speedup": speedup, "rounds_min": min(per) if rounds else None,
                    "rounds_max": max(per) if rounds else None, "change": 1 / speedup - 1})
    return out


def gluon_ablation_table(name: str, results=None):
    """:func:`gluon_ablation` as a :class:`flashsim.course.Table` (chapter 14); None when there is nothing."""
    spec = _ablation_spec(name)
    run = _ablation_run(name, results)
    rows = gluon_ablation(name, run)
    if not rows:
        return None
    rounds = run.get("rounds")
    return Table(["dtype", "d", "causal", "N", "default ms", f"{spec['off_label']} ms", "time off / on",
                  "its rounds", "speed change off"],
                 [[r["dtype"], r["d"], "yes" if r["causal"] else "no", r["n"], round(r["on_ms"], 3),
                   round(r["off_ms"], 3), round(r["speedup"], 3), _span([r["rounds_min"], r["rounds_max"]]),
                   f"{r['change']:+.1%}"] for r in rows],
                 f"The Gluon {spec['pass']} with {spec['feature']} switched off ({spec['off_label']}), timed beside "
                 f"the default in the same run{f', {rounds} interleaved rounds' if rounds else ''} ({len(rows)} rows; "
                 f"{_recorded_label(run['source'])})")


def gluon_ablation_summary(runs=None) -> list[dict]:
    """Every measured switch in one list (chapter 14): {"name", "feature", "pass", "rows", "rounds" (timing rounds
    per row, None: one timing), "faster_with" (rows where the feature makes the kernel faster, median over the
    rounds), "faster_every_round", "slower_every_round" (rows where it does so, or the opposite, in every round:
    None without rounds), "min", "median", "max" (of time off / time on), "change_min", "change_max" (speed off /
    speed on - 1)}; `runs`: {name: run} to read instead of the recorded runs. A switch with no rows is left out."""
    out = []
    for name, spec in GLUON_ABLATIONS.items():
        run = _ablation_run(name, (runs or {}).get(name))
        rows = gluon_ablation(name, run)
        if not rows:
            continue
        s = [r["speedup"] for r in rows]
        c = [r["change"] for r in rows]
        rounds = all(r["rounds_min"] is not None for r in rows)
        out.append({"name": name, "feature": spec["feature"], "pass": spec["pass"], "rows": len(rows),
                    "rounds": run.get("rounds") if rounds else None, "faster_with": sum(x > 1 for x in s),
                    "faster_every_round": sum(r["rounds_min"] > 1 for r in rows) if rounds else None,
                    "slower_every_round": sum(r["rounds_max"] < 1 for r in rows) if rounds else None,
                    "min": min(s), "median": statistics.median(s), "max": max(s),
                    "change_min": min(c), "change_max": max(c)})
    return out


def gluon_ablation_summary_table(runs=None):
    """:func:`gluon_ablation_summary` as a :class:`flashsim.course.Table` (chapter 14); None when nothing was
    measured."""
    summary = gluon_ablation_summary(runs)
    if not summary:
        return None
    def every(k, s):
        return "— (one timing per row)" if s[k] is None else f"{s[k]}/{s['rows']}"

    return Table(["feature", "pass", "rows", "faster with it", "... in every round", "slower in every round",
                  "time off / on: min", "median", "max"],
                 [[s["feature"], s["pass"], s["rows"], f"{s['faster_with']}/{s['rows']}",
                   every("faster_every_round", s), every("slower_every_round", s), round(s["min"], 3),
                   round(s["median"], 3), round(s["max"], 3)] for s in summary],
                 "Each switch of the Gluon kernels timed off beside the default on the same inputs, in one run per "
                 "switch (time off / time on per row, the median over its rounds: > 1 means the feature makes the "
                 "kernel faster; recorded)")


def pingpong_ablation(results=None) -> list[dict]:
    """The Gluon forward with ping-pong off, timed in the same run as the default (chapter 14):
    :func:`gluon_ablation` ``("pingpong")``. Rows whose configuration already had ping-pong off are left out (the
    two timings are of one kernel)."""
    return gluon_ablation("pingpong", load_gluon() if results is None else results)


def pingpong_ablation_table(results=None):
    """:func:`pingpong_ablation` as a :class:`flashsim.course.Table` (chapter 14); None when there is nothing."""
    return gluon_ablation_table("pingpong", load_gluon() if results is None else results)


def _measured(summary: list, name: str, fallback: str) -> str:
    s = next((x for x in summary if x["name"] == name), None)
    if s is None:
        return fallback
    return (f"measured in {s['rows']} rows: {s['change_min']:+.0%} to {s['change_max']:+.0%} speed without it "
            f"(faster with it in {s['faster_with']})")


def feature_table(results=None, runs=None):
    """Each Hopper feature of the chapter (chapter 14): which kernel has it, and what switching it off cost where
    a recorded run measured that (:func:`gluon_ablation_summary`; `results`: the forward run to read for the
    forward's switches, `runs`: {ablation name: run} for any of them); every other entry says so."""
    runs = dict(runs or {})
    if results is not None:
        runs.update({k: results for k, spec in GLUON_ABLATIONS.items() if spec["pass"] == "forward" and k not in runs})
    s = gluon_ablation_summary(runs)
    rows = [
        ["tuned launch configurations", "yes", "yes (per d and mask)", "measured in the tuning sweeps (section 1)"],
        ["software pipelining (num_stages)", "yes (the compiler's)", "explicit: the K/V ring", "sweeps (section 2)"],
        ["TMA copies", "yes (tensor descriptors)", "yes (the producer warp)", "sweeps (section 3)"],
        ["exp2 with the scale in one FMA", "yes", "yes", "not measured on its own"],
        ["longest first (causal)", "yes (reversed grid)", "yes: balanced tile lists, dealt longest first",
         _measured(s, "balanced", "not measured on its own")],
        ["producer warp + consumer warpgroups", "no", "yes", "not measured (the kernel is built on it)"],
        ["ping-pong between consumers", "no (a Triton try: section 6)", "yes",
         _measured(s, "pingpong", "not measured")],
        ["softmax overlapped with the next matmul", "no (a Triton try was slower)", "yes", "not measured"],
        ["persistent grid, L2-sized head groups", "no (a Triton try was slower)", "yes", "not measured in this run"],
        ["backward: L and δ through shared memory", "no (loaded per block)", "yes (copied with Q and dO)",
         _measured(s, "lse_smem", "not measured")],
        ["backward: 128-row query blocks at d=64", "its own tuned blocks", "yes",
         _measured(s, "bwd_block", "not measured")],
    ]
    return Table(["feature", "course Triton kernel", "course Gluon kernel", "switched off, cost"], rows,
                 "What each kernel uses, and what the recorded runs measured of it")


def warp_roles_table(results=None):
    """The Gluon forward's partitions per configuration (chapter 14), from the configurations of the recorded run:
    consumer warpgroups, query rows per CTA tile, K/V ring slots, registers per thread, shared memory."""
    results = load_gluon() if results is None else results
    if not results or not results["configs"]:
        return None
    rows = []
    for (d, causal), cfg in sorted(results["configs"].items()):
        nc, bn, stages = int(cfg["NC"]), int(cfg["BLOCK_N"]), int(cfg["STAGES"])
        rows_per_tile = nc * GLUON_ROWS_PER_CONSUMER
        smem = fwd_smem_bytes(d, 2, nc, bn, stages, cfg.get("V_STAGES"))     # fp16/bf16: Q x2, K and V rings
        rows.append([d, "yes" if causal else "no", "1 warp, 24 regs", f"{nc} × 4 warps, {cfg['CONSUMER_REGS']} regs",
                     rows_per_tile, bn, stages if not cfg.get("V_STAGES") else f"{stages} K, {cfg['V_STAGES']} V",
                     f"{smem / 1024:.0f} KiB", "on" if cfg.get("PINGPONG") else "off"])
    return Table(["d", "causal", "producer", "consumers", "query rows per tile", "BLOCK_N", "K/V slots",
                  "shared memory", "ping-pong"], rows,
                 "The Gluon forward's warp roles per configuration (one CTA per SM; Q double-buffered per consumer)")


def ring_protocol_table(stages: int = 2, consumers: int = 2):
    """The mbarriers of the Gluon forward's shared-memory ring (chapter 14): who waits on each and who completes
    it. ``ready`` barriers complete when TMA has written the slot's bytes; ``empty`` ones when every consumer has
    arrived."""
    if stages < 1 or consumers < 1:
        raise FlashsimError(f"stages={stages}, consumers={consumers}: both must be at least 1")
    rows = [
        ["q_ready[c, b]", 2 * consumers, "consumer c", "TMA, when the Q box's bytes have landed (expect-tx)"],
        ["q_empty[c, b]", 2 * consumers, "the producer", "consumer c, after its last QKᵀ of that tile"],
        ["k_ready[s]", stages, "every consumer", "TMA, when K_j's box has landed"],
        ["k_empty[s]", stages, "the producer", f"all {consumers} consumers (count {consumers}), after S_j"],
        ["v_ready[s]", stages, "every consumer", "TMA, when V_j's box has landed"],
        ["v_empty[s]", stages, "the producer", f"all {consumers} consumers (count {consumers}), after P_j V_j"],
        ["turn[c]", consumers, "consumer c (ping-pong on)", "the consumer before c, after issuing its wgmma"],
    ]
    return Table(["mbarrier", "how many", "who waits", "who completes it"], rows,
                 f"The ring's mbarriers: {stages} K/V slots, {consumers} consumer warpgroups, b = Q buffer 0/1; a "
                 "waiter checks the barrier's phase bit (it flips each time the barrier completes)")


def gluon_io(n: int, d: int, causal: bool = False, batch: int = 1, heads: int = 1, dtype: str = "fp16",
             consumers: int | None = None, block_n: int | None = None, ctas: int = 132,
             triton_blocks: tuple | None = None) -> dict:
    """The kernel view (:func:`flashsim.model.kernel_io.kernel_io`) of the Gluon forward's global-memory traffic
    (chapter 14), next to the Triton forward's.

    The Gluon kernel is an FA2 forward with a query tile of ``consumers × 64`` rows and K/V tiles of ``block_n``
    (default: the recorded configuration for d and causal): each K/V tile is copied once per query tile and shared
    by the consumers, so the kernel view is ``kernel_io("flash_fwd", ...)`` with those blocks. Two things the
    kernel view does not count, given separately: TMA copies whole boxes, so a query tile or K/V tile that runs past
    N still copies its full box ("box_bytes": rows past N come from the next head, or TMA's zero fill at the end of
    the tensor); and each CTA copies one Q tile and K_0 after its last tile, whose scores it drops
    ("prefetch_bytes", for ``min(ctas, tiles)`` CTAs). ``triton_blocks`` (BLOCK_M, BLOCK_N): the Triton kernel's
    (default: its tuned H200 forward blocks, or none without torch/triton).

    Returns {"gluon": {"loads", "stores"}, "triton": ... or None, "triton_blocks", "block_m", "block_n", "box_bytes":
    {"Q", "K", "V"}, "prefetch_bytes", "kv_reads" (K bytes / (B·H·N·d·b): how many times K and V are read),
    "floor": {"loads", "stores"} (every byte once: what the DRAM sees if the L2 holds each head's K and V while its
    query tiles run)}.
    """
    if (d, bool(causal)) not in _recorded_configs() and (consumers is None or block_n is None):
        raise FlashsimError(f"d={d}: the Gluon forward covers d in (64, 128); or pass consumers= and block_n=")
    cfg = _recorded_configs().get((d, bool(causal)), {})
    nc = int(consumers or cfg["NC"])
    bn = int(block_n or cfg["BLOCK_N"])
    bm = nc * GLUON_ROWS_PER_CONSUMER
    es = {"fp16": 2, "bf16": 2}.get(dtype)
    if es is None:
        raise FlashsimError(f"dtype={dtype!r}: the Gluon forward takes fp16 or bf16")
    bh = batch * heads

    def view(block_m, block_n_):
        (launch,) = kernel_io("flash_fwd", n, d, block_m, block_n_, causal=causal, dtype=dtype, batch=batch,
                              heads=heads).per_tensor().values()
        return launch

    gluon = view(bm, bn)
    if triton_blocks is None:
        tuned = tuned_configs().get(("fwd", d, bool(causal)))
        triton_blocks = tuned[:2] if tuned else None
    triton = view(*triton_blocks) if triton_blocks else None
    tiles = n_blocks(n, bm)
    kv_box_rows = sum(int(visible_col_blocks(i, bm, bn, n, causal)) * bn for i in range(tiles))
    box = {"Q": bh * tiles * bm * d * es, "K": bh * kv_box_rows * d * es, "V": bh * kv_box_rows * d * es}
    prefetch = min(ctas, bh * tiles) * (bm + bn) * d * es
    return {"gluon": gluon, "triton": triton, "triton_blocks": triton_blocks, "block_m": bm, "block_n": bn,
            "box_bytes": box, "prefetch_bytes": prefetch, "kv_reads": gluon["loads"]["K"] / (bh * n * d * es),
            "floor": view(n, bn)}


def _recorded_configs() -> dict:
    results = load_gluon()
    return results["configs"] if results else {}


def gluon_io_table(n: int, d: int, causal: bool = False, batch: int = 1, heads: int = 1, dtype: str = "fp16"):
    """:func:`gluon_io` as a :class:`flashsim.course.Table` of MB per tensor (chapter 14)."""
    io = gluon_io(n, d, causal, batch, heads, dtype)
    mb = 1e6
    rows = []
    for kind, tensors in (("loads", ("Q", "K", "V")), ("stores", ("O", "LSE"))):
        for t in tensors:
            tri = io["triton"][kind].get(t) if io["triton"] else None
            rows.append([f"{t} ({kind[:-1]})", None if tri is None else round(tri / mb, 1),
                         round(io["gluon"][kind][t] / mb, 1),
                         round(io["box_bytes"][t] / mb, 1) if t in io["box_bytes"] else "masked stores",
                         round(io["floor"][kind][t] / mb, 1)])
    rows.append(["Q + K_0 copied after the last tile", None, None, round(io["prefetch_bytes"] / mb, 1), None])
    tb = io["triton_blocks"]
    return Table(["tensor", f"Triton kernel view{f' ({tb[0]}×{tb[1]})' if tb else ''}",
                  f"Gluon kernel view ({io['block_m']}×{io['block_n']})", "Gluon TMA boxes", "every byte once"],
                 rows, f"Predicted MB, forward, B={batch}, H={heads}, N={n:,}, d={d}, {dtype}"
                       f"{', causal' if causal else ''}: K and V are read {io['kv_reads']:.1f} times by the Gluon "
                       f"kernel (once per {io['block_m']}-row query tile)")


class GluonSpeedDashboard(Dashboard):
    """The recorded forward speeds against N for one dtype, head dim and mask (chapter 14): cuDNN and
    FlashAttention-2 (SDPA's backends), the course's Triton and Gluon kernels, and the Gluon kernel with ping-pong
    off, and with its balanced tile lists off, where that was timed. ``update(dtype=..., d=..., causal=...)``; ``current`` holds the rows shown."""

    plot = GluonSpeedPlot
    layout = (("dtype", "d", "causal"),)

    def __init__(self, dtype: str = "fp16", d: int = 128, causal: bool = False, results=None):
        self.results = load_gluon() if results is None else results
        if not self.results or not self.results["rows"]:
            raise FlashsimError("no Gluon run to show: load_gluon() found no rows")
        self.dtypes = sorted({r["dtype"] for r in self.results["rows"]})
        self.ds = sorted({r["d"] for r in self.results["rows"]})
        self.dtype, self.d, self.causal = dtype, int(d), bool(causal)
        self.current: list = []
        self.update()

    def controls(self):
        return {"dtype": choice("dtype", self.dtypes), "d": choice("head dim d", self.ds), "causal": toggle("causal")}

    def apply(self, dtype: str | None = None, d: int | None = None, causal: bool | None = None) -> list:
        dtype = self.dtype if dtype is None else _DTYPES.get(dtype, dtype)
        d = self.d if d is None else int(d)
        if dtype not in self.dtypes:
            raise FlashsimError(f"dtype={dtype!r}: the run has {self.dtypes}")
        if d not in self.ds:
            raise FlashsimError(f"d={d}: the run has head dims {self.ds}")
        self.dtype, self.d = dtype, d
        self.causal = self.causal if causal is None else bool(causal)
        self.current = sorted(gluon_rows(self.results, self.dtype, self.d, self.causal), key=lambda r: r["n"])
        return self.current

    def readout(self) -> str:
        rows = self.current
        if not rows:
            return "no rows for this choice"
        g_cudnn = [_ratio(r, "gluon", "cudnn") for r in rows]
        cfg = self.results["configs"].get((self.d, self.causal), {})
        return (f"{self.dtype}, d={self.d}, {'causal' if self.causal else 'non-causal'}: Gluon / cuDNN "
                f"{_span(g_cudnn)} ({sum(x >= 1.0 for x in g_cudnn)}/{len(rows)} rows at least as fast), Gluon / "
                f"FlashAttention-2 {_span([_ratio(r, 'gluon', 'flash') for r in rows])}, Gluon / Triton "
                f"{_span([_ratio(r, 'gluon', 'triton') for r in rows])}; configuration: {cfg.get('NC', '?')} "
                f"consumers × 64 rows, {cfg.get('STAGES', '?')} K/V slots")

    def plot_args(self) -> dict:
        rows = self.current
        series = {GLUON_KERNEL_LABELS[k]: [r["tflops"][k] for r in rows] for k in GLUON_KERNELS}
        off = [r["no_pingpong_tflops"] for r in rows]
        if any(isinstance(x, (int, float)) for x in off):
            series["course Gluon, ping-pong off"] = off
        keep = GLUON_ABLATIONS["balanced"]["keep"]
        stride = [(r["timed"].get("gluon_committed") or {}).get("tflops") if keep(r, self.results) else None
                  for r in rows]
        if any(isinstance(x, (int, float)) for x in stride):
            series["course Gluon, balanced lists off"] = stride
        return {"ns": [r["n"] for r in rows], "series": series,
                "title": f"{self.results['device'] or 'GPU'}: forward, {self.dtype}, d={self.d}, "
                         f"{'causal' if self.causal else 'non-causal'}, B·N = {rows[0]['batch'] * rows[0]['n']:,}"
                         if rows else "no rows"}


def measure_here(n: int = 4096, d: int = 128, causal: bool = False, dtype: str = "fp16", batch: int | None = None,
                 heads: int | None = None) -> dict | None:
    """Time the Gluon forward on this machine's GPU next to the course's Triton forward and SDPA's FlashAttention-2
    and cuDNN backends (chapter 14), each checked against a float64 reference first. None, having printed why in one
    line, where that cannot run: no torch/triton, no CUDA GPU, or no Hopper GPU with Triton's Gluon.

    Returns {"device", "size": {...}, "ms": {kernel: ms}, "tflops": {kernel: TFLOP/s}, "err": {kernel: max abs
    error}} over the kernels that ran (SDPA backends this PyTorch lacks are left out)."""
    why = missing("kernels")
    if why:
        print(why)
        return None
    from flashsim.kernels import gluon as gluon_kernels       # guarded: imports nothing heavy
    ok, why = gluon_kernels.available()
    if not ok:
        print(f"the Gluon forward does not run here: {why}")
        return None
    import inspect

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from flashsim.kernels import flash_forward
    from flashsim.measure import bench

    batch = batch or max(1, 16384 // n)
    heads = heads or 2048 // d
    torch_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    g = torch.Generator(device="cuda").manual_seed(14)
    q, k, v = (torch.randn(batch, heads, n, d, device="cuda", dtype=torch_dtype, generator=g) for _ in range(3))
    triton_kw = {"gluon": False} if "gluon" in inspect.signature(flash_forward).parameters else {}
    runs = {"triton": lambda: flash_forward(q, k, v, causal=causal, **triton_kw)[0],
            "gluon": lambda: gluon_kernels.gluon_forward(q, k, v, causal=causal)[0]}
    for name, be in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", getattr(SDPBackend, "CUDNN_ATTENTION", None))):
        if be is not None:
            runs[name] = (lambda be=be: _sdpa(F, sdpa_kernel, be, q, k, v, causal))
    ref = _reference(q[:1, :2], k[:1, :2], v[:1, :2], causal)            # float64, on a slice
    flops = 4 * batch * heads * n * n * d * (0.5 if causal else 1.0)
    out = {"device": torch.cuda.get_device_name(), "size": {"batch": batch, "heads": heads, "n": n, "d": d,
                                                            "dtype": dtype, "causal": causal},
           "ms": {}, "tflops": {}, "err": {}}
    for name in GLUON_KERNELS:
        if name not in runs:
            continue
        try:
            o = runs[name]()
        except RuntimeError as e:                         # e.g. an SDPA backend that refuses these inputs
            print(f"{GLUON_KERNEL_LABELS[name]}: did not run ({str(e).splitlines()[0][:120]})")
            continue
        out["err"][name] = float((o[:1, :2].double() - ref).abs().max())
        out["ms"][name] = bench(runs[name])
        out["tflops"][name] = flops / (out["ms"][name] * 1e-3) / 1e12
    return out


def _sdpa(F, sdpa_kernel, backend, q, k, v, causal):
    with sdpa_kernel(backend):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def _reference(q, k, v, causal):
    import torch
    o = reference_attention(q.double().cpu().numpy(), k.double().cpu().numpy(), v.double().cpu().numpy(),
                            causal=causal)
    return torch.from_numpy(o).to(q.device)


def gluon_ncu_io(path=None) -> dict | None:
    """ncu's DRAM and L2 bytes of one launch of the Gluon forward, cuDNN's forward and the Gluon backward, recorded on
    an H200 (``gluon_ncu_io_h200``: fp16, d=128, non-causal, N=4096, B=4, H=16), or a JSON file of the same kind.

    Returns {"source", "n", "d", "kernels": {"gluon_fwd" | "cudnn_fwd" | "gluon_bwd": {"dram_read_bytes",
    "dram_write_bytes", "l2_bytes", "time_s"}}}; None (said why) for an unusable `path`."""
    found = _read(path, "gluon_ncu_io_h200", "kernels")
    if found is None:
        return None
    source, data = found
    return {"source": source, "n": data.get("n"), "d": data.get("d"),
            "kernels": {k: dict(v) for k, v in data["kernels"].items() if isinstance(v, dict)}}


def gluon_dram_model(n: int = 4096, d: int = 128, tokens: int = 16384, width: int = 2048) -> dict:
    """The L2 model's DRAM bytes for the Gluon kernels' IO comparison with ncu (chapter 14), at B·N = ``tokens``
    and H·d = ``width``: the forward as the Triton launch order at the Gluon kernel's 128 × 128 tiles; the
    backward as the Triton dK/dV pass at 64 × 128 plus the fp32 dQ buffer, read once (its zeros) and written back
    once (its reduce-adds stay in the L2). {"fwd_read_bytes", "bwd_read_bytes", "bwd_write_bytes"}."""
    batch, heads = tokens // n, width // d
    fwd = kernel_dram("flash_fwd", n, d, 128, 128, batch=batch, heads=heads)["total"]
    bwd = kernel_dram("flash_bwd", n, d, 64, 128, batch=batch, heads=heads)["_bwd_dkdv"]
    dq_buffer_bytes = 4 * tokens * width                    # fp32 dQ, (B, H, N, d)
    return {"fwd_read_bytes": fwd.dram_read_bytes, "bwd_read_bytes": bwd.dram_read_bytes + dq_buffer_bytes,
            "bwd_write_bytes": bwd.dram_write_bytes + dq_buffer_bytes}
