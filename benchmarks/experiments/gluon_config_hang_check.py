"""Does a Gluon forward configuration finish? Each case in a process of its own with a timeout (a hung kernel
leaves its process's CUDA context unusable), compiled and run once on small random inputs, checked against
torch's SDPA. For the H200 (needs a Hopper GPU).

    python benchmarks/experiments/gluon_config_hang_check.py '{"STAGES": 3}' '{"STAGES": 3, "BALANCED": false}'

Prints one line per configuration: finished (with the error against SDPA) or timed out after TIMEOUT_S seconds.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = float(os.environ.get("TIMEOUT_S", "60"))

CHILD = r"""
import json, sys, torch, torch.nn.functional as F
sys.path.insert(0, sys.argv[1])
import flashsim.kernels.gluon as G
cfg, d, causal, n = json.loads(sys.argv[2]), int(sys.argv[3]), bool(int(sys.argv[4])), int(sys.argv[5])
torch.manual_seed(0)
q, k, v = (torch.randn(2, 3, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
o, _ = G.gluon_forward(q, k, v, causal=causal, config=cfg)
torch.cuda.synchronize()
ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
print(json.dumps(dict(err=((o.float() - ref).norm() / ref.norm()).item())))
"""


def main(argv=None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    d, causal, n = int(os.environ.get("D", "64")), os.environ.get("CAUSAL", "1"), int(os.environ.get("N", "1000"))
    for cfg in args:
        t0 = time.time()
        try:
            r = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), cfg, str(d), causal, str(n)],
                               capture_output=True, text=True, timeout=TIMEOUT_S)
            tail = (r.stdout.strip().splitlines() or [""])[-1] if r.returncode == 0 else r.stderr.strip()[-300:]
            print(f"{cfg} d={d} causal={causal} N={n}: finished rc={r.returncode} in {time.time() - t0:.0f} s {tail}")
        except subprocess.TimeoutExpired:
            print(f"{cfg} d={d} causal={causal} N={n}: TIMED OUT after {TIMEOUT_S:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
