"""How fast is the simulator? The issue's two speed targets, measured on this machine (chapter 05's sliders).

1. Count mode for one slider move: ``flashsim.traffic("flash2", n=65536, d=128, block_r=64, block_c=64)``
   must take ≤ 20 ms (best of several repeats, as a slider drag calls it again and again).
2. Step mode for flash2 forward at N=4096, d=64, Br=Bc=128 (real numbers, Event log on) must take ≤ 2 s.

It also times count mode for every algo and step mode of Algorithm 0, for reference. Run::

    .venv/bin/python benchmarks/sim_speed.py            # prints a table, writes benchmarks/results/sim_speed_*.json

Exit status 1 if a target is missed. Timings are wall-clock on a shared machine: the best of the repeats is the
figure that says what the code costs.
"""
from __future__ import annotations

import json
import os
import platform
import sys
import time
from datetime import datetime, timezone

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import flashsim  # noqa: E402
from flashsim.model.attention.flash import run_flash  # noqa: E402
from flashsim.model.attention.standard import run_standard  # noqa: E402
from flashsim.model.problem import make_problem  # noqa: E402

COUNT_TARGET_S = 0.020
STEP_TARGET_S = 2.0


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> int:
    rows = []
    # 1. count mode, the slider target
    flashsim.traffic("flash2", 65536, 128, 64, 64)  # warm imports
    moves = iter(range(10**6))  # a slider move changes the arguments: no call can hit a cache of the last one
    t = best_of(lambda: flashsim.traffic("flash2", 65536 - next(moves), 128, 64, 64), 20)
    rows.append({"case": "count flash2 N=65536 d=128 Br=Bc=64 (traffic)", "seconds": t, "target_s": COUNT_TARGET_S})
    for algo, kw in (("flash1", {}), ("flash2", dict(causal=True, backward=True)), ("naive", dict(backward=True)),
                     ("eager", dict(causal=True, backward=True, dropout_p=0.1))):
        t = best_of(lambda: flashsim.traffic(algo, 65536 - next(moves), 128, 64, 64, **kw), 10)
        rows.append({"case": f"count {algo} N=65536 d=128 Br=Bc=64 {kw}", "seconds": t})

    # 2. step mode, flash2 forward
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 4096, 64), dtype=np.float32) for _ in range(3))
    p = make_problem("flash2", 4096, 64, 128, 128)
    t = best_of(lambda: run_flash(p, q, k, v, record_events=True), 3)
    rows.append({"case": "step flash2 fwd N=4096 d=64 Br=Bc=128 (events on)", "seconds": t,
                 "target_s": STEP_TARGET_S})
    t = best_of(lambda: flashsim.simulate("flash2", 4096, 64, 128, 128), 1)
    rows.append({"case": "simulate flash2 fwd N=4096 d=64 (step + float64 and fp16 references)", "seconds": t})
    pn = make_problem("naive", 4096, 64)
    t = best_of(lambda: run_standard(pn, q, k, v, record_events=True), 2)
    rows.append({"case": "step naive fwd N=4096 d=64 (events on)", "seconds": t})

    ok = all(r["seconds"] <= r["target_s"] for r in rows if "target_s" in r)
    for r in rows:
        target = f"  (target ≤ {r['target_s'] * 1e3:.0f} ms: {'ok' if r['seconds'] <= r['target_s'] else 'MISSED'})" \
            if "target_s" in r else ""
        print(f"{r['seconds'] * 1e3:10.2f} ms  {r['case']}{target}")
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out = {"when_utc": stamp, "machine": platform.platform(), "python": platform.python_version(),
           "cpus": os.cpu_count(), "numpy": np.__version__, "load_avg": os.getloadavg(), "rows": rows, "ok": ok}
    path = os.path.join(os.path.dirname(__file__), "results", f"sim_speed_{stamp}.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
