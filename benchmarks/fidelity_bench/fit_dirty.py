"""The fit of ``L2_DIRTY_MIX`` (flashsim/model/calibration.py): how many bytes the L2 model leaves dirty at the end of
a launch, against what the write-back measurement found left on the GPU, over a grid of (c0, c1). No GPU needed.

The data: every launch of the H200 write-back sweep (the results index's calibration keys ``h200_writeback_sweep``,
``h200_flash_fwd_8warp`` and ``h200_holdout_new7``) that stores at least ``--min-store-mib`` MiB: its measured dirty
residue (``wb_residue_write_bytes``: written to DRAM by the flush after the kernel) against the model's
``dirty_end_bytes`` at each grid point; the fixed limit (``dirty_mix=None``) is printed first.

    python benchmarks/fidelity_bench/fit_dirty.py [--c0 0.1,0.2,0.3,0.4] [--c1 0.6,0.9,1.2,1.5,1.8] [--workers 2]

About 25 s of two cores per grid point (166 launches, 119 configurations).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from benchmarks.fidelity_bench.configs import runner_args  # noqa: E402
from flashsim.model.kernel_io import kernel_dram  # noqa: E402

MIB = 1 << 20
FILES = ("fidelity_h200_2026-12-03_recompare.json", "fidelity_h200_2026-12-03_recompare_7.json",
         "fidelity_h200_2026-12-03_new7.json")


def residues(min_store_mib: float) -> list:
    """[(config, launch name, measured dirty residue bytes)] of the launches storing at least that much."""
    out = []
    for name in FILES:
        with open(os.path.join(ROOT, "benchmarks", "results", name)) as f:
            for row in json.load(f)["rows"]:
                for L in row["launches"]:
                    if "wb_residue_write_bytes" in L and L["sim_store_bytes"] >= min_store_mib * MIB:
                        out.append((row["config"], L["launch"], L["wb_residue_write_bytes"]))
    return out


def _dirty_end(job) -> tuple:
    cfg, mix = job
    res = kernel_dram(**runner_args(cfg), dirty_mix=mix)
    return {name: r.dirty_end_bytes for name, r in res.items() if name != "total"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--c0", default="0.1,0.2,0.3,0.4")
    ap.add_argument("--c1", default="0.6,0.9,1.2,1.5,1.8")
    ap.add_argument("--min-store-mib", type=float, default=8.0)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args(argv)
    pts = residues(a.min_store_mib)
    cfgs = {json.dumps(c, sort_keys=True): c for c, _, _ in pts}
    mixes = [None] + [(float(c0), float(c1)) for c0 in a.c0.split(",") for c1 in a.c1.split(",")]
    jobs = [(cfgs[k], m) for m in mixes for k in cfgs]
    with ProcessPoolExecutor(a.workers) as ex:
        ends = dict(zip([(k, m) for m in mixes for k in cfgs], ex.map(_dirty_end, jobs, chunksize=4)))
    print(f"{len(pts)} launches of {len(cfgs)} configurations; dirty bytes at the end, model - measured (MiB)")
    for mix in mixes:
        err = [(ends[(json.dumps(c, sort_keys=True), mix)][launch] - meas) / MIB for c, launch, meas in pts]
        print(f"{str(mix):>12}  mean {statistics.mean(err):+.2f}  rms {statistics.fmean(e * e for e in err) ** .5:.2f}"
              f"  max {max(map(abs, err)):.2f}  within 2 MiB {sum(abs(e) <= 2 for e in err)}/{len(err)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
