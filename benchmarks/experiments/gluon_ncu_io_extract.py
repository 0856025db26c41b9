"""The ncu DRAM bytes of the Gluon kernels and cuDNN's (fp16, d=128, non-causal, N=4096) as JSON, read from the
recorded ncu text output, so that chapter 14 prints them from a recorded result instead of from literals.

    python benchmarks/experiments/gluon_ncu_io_extract.py \
        benchmarks/results/gluon_bwd_h200_2026-12-02_ncu.txt benchmarks/results/gluon_ncu_io_h200_2026-12-02_3.json
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

UNITS = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1}
KERNELS = {"attn_fwd_sm90": "gluon_fwd", "cudnn_generated_fort_native_sdpa_sm90_flash_fprop": "cudnn_fwd",
           "attn_bwd_sm90": "gluon_bwd"}
METRICS = {"dram__bytes_read.sum": "dram_read_bytes", "dram__bytes_write.sum": "dram_write_bytes",
           "gpu__time_duration.sum": "time_s", "lts__t_bytes.sum": "l2_bytes"}


def parse(text: str) -> dict:
    out, cur = {}, None
    for line in text.splitlines():
        head = re.match(r"^  (\S+)", line)
        if head and not line.startswith("   "):
            cur = next((v for k, v in KERNELS.items() if head.group(1).startswith(k)), None)
            continue
        m = re.match(r"^\s+(\S+)\s+(\S+)\s+([\d.,]+)\s*$", line)
        if cur and m and m.group(1) in METRICS:
            value = float(m.group(3).replace(",", "")) * UNITS[m.group(2)]
            key = METRICS[m.group(1)]
            out.setdefault(cur, {})[key] = round(value, 9) if key == "time_s" else int(round(value))
    return out


def main(argv=None):
    src, dst = (argv or sys.argv[1:])[:2]
    kernels = parse(Path(src).read_text())
    data = {"what": "ncu DRAM and L2 bytes of one launch, fp16, d=128, non-causal, N=4096, B=4, H=16 (Q, K, V, dO "
                    "67.1 MB each; fp32 dQ buffer 134.2 MB)",
            "gpu": "NVIDIA H200", "date_utc": "2026-12-02 (run 3 of gluon_bwd_h200_2026-12-02)",
            "source": src, "command": "python benchmarks/experiments/gluon_ncu_io_extract.py " + " ".join([src, dst]),
            "ncu_command": "ncu --clock-control none --profile-from-start off --metrics gpu__time_duration.sum,"
                           "dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum python3 "
                           "benchmarks/gluon_validate.py --out /dev/null --ncu fp16,128,0,4096 (and --bwd --ncu-bwd "
                           "fp16,128,0,4096)",
            "n": 4096, "d": 128, "batch": 4, "heads": 16, "dtype": "float16", "causal": False, "kernels": kernels}
    Path(dst).write_text(json.dumps(data, indent=1) + "\n")
    print(json.dumps(kernels, indent=1))


if __name__ == "__main__":
    main()
