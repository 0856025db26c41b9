"""Nsight Compute of the Gluon kernels' launches (issue 28 item 2), on a Hopper GPU: the configurations of
benchmarks/gluon_io/configs.json (written down before they were measured), each launch's requested bytes (the L1's
LSU counters), L2 bytes from the SMs (reads, writes, reductions) and DRAM bytes, with ncu's caches flushed before
each launch (its default), as benchmarks/fidelity_h200.py's window measurement.

    PYTHONPATH=$PWD python3 benchmarks/gluon_io/measure.py --out $OUT/gluon_io.json [--ids fwd_fp16_d128_nc_4096,...]

Two ncu runs (forward configurations, then backward ones), each one child process running its configurations in
turn (fresh random inputs, never zeros); a backward configuration runs the Gluon forward first for o and lse (that
launch is profiled too and left out). The child notes which configurations ran (a failing one is skipped, saying
why), so the launches are matched to their configurations by that list. The comparison with the predictions
(flashsim.measure.gluon_io) is made where no GPU is needed: benchmarks/gluon_io/report.py.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
CONFIGS = os.path.join(ROOT, "benchmarks", "gluon_io", "configs.json")
KERNEL_REGEX = "attn_fwd_sm90|attn_bwd_sm90|_gluon_bwd_prologue|_gluon_dq_epilogue"
#: launches of one call of each kernel as ncu lists them (a backward call is preceded by its forward)
EXPECTED = {"fwd": ["attn_fwd_sm90"],
            "bwd": ["attn_fwd_sm90", "_gluon_bwd_prologue", "attn_bwd_sm90", "_gluon_dq_epilogue"]}
SKIPPED_SETUP = {"fwd": 0, "bwd": 1}
#: beyond flashsim.measure.ncu.NCU_METRICS: the L2's reduction and atomic traffic from the SMs (the TMA dQ adds)
EXTRA_METRICS = ["lts__t_sectors_srcunit_tex_op_red.sum", "lts__t_sectors_srcunit_tex_op_atom.sum",
                 "l1tex__t_bytes_pipe_lsu_mem_global_op_red.sum", "l1tex__t_bytes_pipe_lsu_mem_global_op_atom.sum"]


def load_configs(ids=None) -> list:
    with open(CONFIGS) as f:
        cfgs = json.load(f)["configs"]
    return [c for c in cfgs if not ids or c["id"] in ids]


def child(spec_path: str) -> None:
    """Under ncu: each configuration once, in order; which ran (and why not) into spec["done"]'s file."""
    os.environ.setdefault("FLASHSIM_POISON", "1")
    import torch

    from flashsim.kernels import gluon as G
    with open(spec_path) as f:
        spec = json.load(f)
    done = []
    for c in spec["configs"]:
        try:
            dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[c["dtype"]]
            torch.manual_seed(zlib.crc32(c["id"].encode()))
            q, k, v = (torch.randn(c["B"], c["H"], c["N"], c["d"], device="cuda", dtype=dt) for _ in range(3))
            o, lse = G.gluon_forward(q, k, v, causal=c["causal"])
            if c["kernel"] == "bwd":
                do = torch.randn_like(q)
                dq, dk, dv = G.gluon_backward(q, k, v, o, lse, do, causal=c["causal"])
                ok = all(torch.isfinite(x).all().item() for x in (dq, dk, dv))
            else:
                ok = bool(torch.isfinite(o).all().item() and torch.isfinite(lse).all().item())
            torch.cuda.synchronize()
            done.append({"id": c["id"], "ran": True, "finite": ok})
        except Exception as exc:
            torch.cuda.synchronize()
            done.append({"id": c["id"], "ran": False, "error": f"{type(exc).__name__}: {exc}"[-1500:]})
        finally:
            with open(spec["done"], "w") as f:
                json.dump(done, f)
            torch.cuda.empty_cache()


def profile(cfgs: list, timeout: float) -> dict:
    """One ncu run over ``cfgs`` (all of one kernel): {"rows": [{"config", "launches"} | {"config", "error"}],
    "metrics": the metric names ncu answered}."""
    from flashsim.measure.ncu import NCU_METRICS, ncu_profile_script
    with tempfile.TemporaryDirectory() as tmp:
        spec = {"configs": cfgs, "done": os.path.join(tmp, "done.json")}
        spec_path = os.path.join(tmp, "spec.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        records, metrics = None, None
        for m in (NCU_METRICS + EXTRA_METRICS, NCU_METRICS):
            try:
                records = ncu_profile_script(os.path.abspath(__file__), KERNEL_REGEX, ["--child", spec_path],
                                             metrics=m, timeout=timeout)
                metrics = m
                break
            except Exception:
                last = traceback.format_exc()[-2000:]
        done = json.load(open(spec["done"])) if os.path.exists(spec["done"]) else []
    if records is None:
        return {"rows": [{"config": c, "error": last} for c in cfgs], "metrics": None}
    return {"rows": match(cfgs, records, done), "metrics": metrics}


def match(cfgs: list, records: list, done: list) -> list:
    """ncu's launch ``records`` (in order) assigned to the configurations the child ran (``done``), each call's
    launches checked by name; the backward's setup forward left out."""
    rows, i = [], 0
    ran = {d["id"]: d for d in done}
    for c in cfgs:
        d = ran.get(c["id"])
        if not d or not d["ran"]:
            rows.append({"config": c, "error": (d or {}).get("error", "not reached (the child stopped before it)")})
            continue
        names = EXPECTED[c["kernel"]]
        got = records[i:i + len(names)]
        i += len(names)
        if len(got) != len(names) or not all(n in r["kernel"] for n, r in zip(names, got)):
            rows.append({"config": c, "error": f"launches {[r['kernel'] for r in got]}, expected {names}"})
            continue
        rows.append({"config": c, "finite": d.get("finite"), "launches": got[SKIPPED_SETUP[c["kernel"]]:]})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), "gluon_io.json"))
    ap.add_argument("--ids", default="", help="comma-separated configuration ids (default: all)")
    ap.add_argument("--timeout", type=float, default=130.0, help="seconds per ncu run (forward, backward)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        child(a.child)
        return 0
    from flashsim.measure.provenance import run_info
    t0 = time.time()
    cfgs = load_configs(set(filter(None, a.ids.split(","))))
    result = {"info": run_info("PYTHONPATH=$PWD python3 benchmarks/gluon_io/measure.py " + " ".join(argv or sys.argv[1:])),
              "kernel_regex": KERNEL_REGEX, "rows": [], "metrics": {}}
    for kernel in ("fwd", "bwd"):
        group = [c for c in cfgs if c["kernel"] == kernel]
        if not group:
            continue
        t1 = time.time()
        got = profile(group, a.timeout)
        result["rows"] += got["rows"]
        result["metrics"][kernel] = got["metrics"]
        print(f"[{time.time() - t0:6.1f}s] ncu {kernel}: {sum('launches' in r for r in got['rows'])}/{len(group)} "
              f"configurations in {time.time() - t1:.0f}s", flush=True)
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1, default=str)
    result["wall_seconds"] = round(time.time() - t0, 1)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1, default=str)
    for r in result["rows"]:
        c = r["config"]
        if "error" in r:
            print(f"{c['id']}: {r['error'].strip().splitlines()[-1]}")
        for L in r.get("launches", []):
            print(f"{c['id']:24s} {L['kernel'][:22]:22s} ld {L['global_load_bytes'] / 2**20:9.2f} st "
                  f"{L['global_store_bytes'] / 2**20:9.2f} DRAM r {L['dram_read_bytes'] / 2**20:9.2f} w "
                  f"{L['dram_write_bytes'] / 2**20:9.2f} MiB {L['duration_ns'] / 1e3:8.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
