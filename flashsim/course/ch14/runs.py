"""The recorded H200 runs chapter 14 shows, read and normalised (:mod:`flashsim.course.kit.results`).

- the tuning sweeps of the course's Triton kernels: :func:`load_tuning`, :func:`tuned_configs` (the package's
  launch configurations), :func:`tuning_summary` (best pointer-load against best TMA configuration per kernel);
- the warp-specialized (Gluon) forward's run, timed beside cuDNN, SDPA's FlashAttention-2 backend and the Triton
  forward on the same inputs: :func:`load_gluon`, :func:`load_gluon_backward`, :func:`gluon_rows`, and the speed
  ratios of a row (:func:`speed_ratio`, :func:`time_ratios`: the median over the row's interleaved timing rounds);
- :func:`recorded_on`: the GPU and date a run says it was measured on (its own metadata), for labels.

Every loader also reads a JSON file of the same kind (``path=``), e.g. a learner's own GPU run; an unusable file is
said so and gives None or []. Captions say "recorded" for the shipped results and the file's path otherwise.
"""
from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

from flashsim.course.kit.optional import missing
from flashsim.course.kit.results import load_result, provenance_label, recorded_names, result_source
from flashsim.kernels.gluon import forward_config     # configuration rules only: nothing heavy

__all__ = ["TUNING_KERNELS", "TUNING_KERNEL_LABELS", "config_label", "load_tuning", "tuned_configs",
           "tuning_summary", "GLUON_KERNELS", "GLUON_KERNEL_LABELS", "GLUON_ROWS_PER_CONSUMER", "GLUON_TARGETS",
           "DTYPES", "load_gluon", "load_gluon_backward", "gluon_rows", "time_ratios", "speed_ratio",
           "recorded_label", "recorded_on"]


def recorded_label(source: str) -> str:
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



#: the tuning sweep's kernel names (benchmarks/tune_attention.py), in the order tables list them
TUNING_KERNELS = ("fwd", "dkdv", "dq", "atomic")
#: what each of them is
TUNING_KERNEL_LABELS = {"fwd": "forward", "dkdv": "bwd K/V pass", "dq": "bwd dQ pass",
                        "atomic": "bwd one pass (atomic dQ)"}
#: the tuning sweep's kernel names -> the kernel names of flashsim.kernels._common.TUNED_H200
_TUNED_NAMES = {"fwd": "flash_fwd", "dkdv": "flash_bwd_dkdv", "dq": "flash_bwd_dq"}
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


#: the kernels of the Gluon run, in the order the tables list them
GLUON_KERNELS = ("cudnn", "flash", "triton", "gluon")
#: what each of them is (SDPA's backends named)
GLUON_KERNEL_LABELS = {"cudnn": "SDPA cuDNN", "flash": "SDPA FlashAttention-2", "triton": "course Triton",
                       "gluon": "course Gluon"}
_GLUON = "gluon_fwd_h200"
#: the correctness grid run in the same call as the recorded timing run (its checks, where the run has none)
_GLUON_GRID = "gluon_grid_h200"
DTYPES = {"float16": "fp16", "bfloat16": "bf16", "fp16": "fp16", "bf16": "bf16"}
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
    return {"dtype": DTYPES.get(raw["dtype"], raw["dtype"]), "d": int(raw["d"]), "causal": bool(raw["causal"]),
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

    Returns {"source", "device", "sms", "versions", "rounds" (timing rounds per row, or None), "date" (the run's
    ``date_utc``), "checks": {"passed",
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
            "rounds": data.get("rounds"), "date": data.get("date_utc"),
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
    return [r for r in results["rows"] if (dtype is None or r["dtype"] == DTYPES.get(dtype, dtype))
            and (d is None or r["d"] == d) and (causal is None or r["causal"] == bool(causal))]


def time_ratios(r: dict, num: str, den: str) -> list:
    """num's time / den's time in row `r`, per timing round where both were timed in rounds, else the one ratio
    of their times ([] where the row did not time both)."""
    timed = r.get("timed") or {k: {"ms": ms, "rounds": None} for k, ms in r["ms"].items()}
    a, b = timed.get(num), timed.get(den)
    if not a or not b:
        return []
    rounds = [x / y for x, y in zip(a["rounds"] or (), b["rounds"] or ()) if x is not None and y is not None]
    return rounds or [a["ms"] / b["ms"]]


def speed_ratio(r: dict, a: str, b: str) -> float | None:
    """Speed of kernel `a` / speed of kernel `b` in row `r` (b's time / a's): the median over the row's timing
    rounds of the per-round ratio, as the run computed its own (one ratio of median times in a run without
    rounds); None where the row did not time both."""
    ratios = time_ratios(r, b, a)
    return statistics.median(ratios) if ratios else None


def recorded_on(results: dict | None = None) -> str:
    """"<GPU>, <date>" of a run as :func:`load_gluon` reads it (default: the recorded forward run), from the run's
    own metadata (:func:`flashsim.course.kit.results.provenance_label`): what a figure of its numbers is labelled
    with."""
    results = load_gluon() if results is None else results
    if not results:
        return "no run"
    return provenance_label(results)
