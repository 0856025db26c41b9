"""On the GPU: compile the Gluon forward under given configuration overrides (one launch each on small random
inputs), disassemble the cubins Triton cached, and count the exponentials that overlap the PV wgmma
(sass_wgmma_overlap.py). The offline compile uses this checkout's triton; this checks the device's own ptxas.

    TRITON_CACHE_DIR=/tmp/tc python benchmarks/experiments/gluon_fwd_sass.py '{}' '{"PV_WAIT_BLOCK": true}'

Env D (head dim, default 128), CAUSAL (0/1, default 0). Prints one line per configuration.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
import triton  # noqa: E402

import flashsim.kernels.gluon as G  # noqa: E402
from sass_wgmma_overlap import describe, stretches  # noqa: E402


def _disasm(cubin: Path) -> str:
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "nvdisasm"
    cmd = [str(tool), "-c", str(cubin)] if tool.exists() else ["cuobjdump", "-sass", str(cubin)]
    if not tool.exists() and not shutil.which("cuobjdump"):
        raise FileNotFoundError("neither triton's nvdisasm nor cuobjdump")
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def main(argv=None) -> int:
    cache = Path(os.environ["TRITON_CACHE_DIR"])
    d, causal = int(os.environ.get("D", "128")), os.environ.get("CAUSAL", "0") == "1"
    q, k, v = (torch.randn(2, 4, 1024, d, device="cuda", dtype=torch.float16) for _ in range(3))
    for spec in (argv if argv is not None else sys.argv[1:]):
        before = set(cache.rglob("*.cubin"))
        G.gluon_forward(q, k, v, causal=causal, config=json.loads(spec))
        torch.cuda.synchronize()
        new = sorted(set(cache.rglob("*.cubin")) - before)
        for cubin in new:
            print(f"d={d} causal={int(causal)} {spec}: {cubin.name}: " + describe(stretches(_disasm(cubin))))
        if not new:
            print(f"d={d} causal={int(causal)} {spec}: no new cubin (cached?)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
