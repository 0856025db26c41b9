#!/usr/bin/env bash
# One device call (H200) for issue 15: the committed kernels' whole same-run table with every column chapter 14
# reads (cuDNN, SDPA-flash, the course's Triton kernels, Gluon; ping-pong off in the fp16 rows; in the causal rows
# the forward with its balanced tile lists switched off, BALANCED=False, the fixed stride), after the correctness
# grid (forward and backward) and the GPU tests; then ncu --set full of the forward at fp16 d=64 causal N=2048 (a
# row that misses cuDNN) beside cuDNN's, summarised. Written into $OUT as it goes.
# Usage: OUT=/tmp/out bash benchmarks/experiments/gluon_final_run.sh
source "$(dirname "$0")/gluon_run_common.sh"     # O, log, quiet, machine_header
W=/tmp/ncu_fwd; mkdir -p $W
OFF='{"d64_causal1": {"BALANCED": false}, "d128_causal1": {"BALANCED": false}}'
{
log start
machine_header
log grid
timeout "${GRID_S:-150}" python3 benchmarks/gluon_validate.py --bwd --no-timing --no-triton --grid bwd,fwd \
    --out "$O/grid.json" 2>&1 | quiet | tail -4
OK=$(python3 -c "import json; r = json.load(open('$O/grid.json')); c = r['checks']; \
print(int(len(c) == 80 and all(x['ok'] for x in c)))" 2>/dev/null || echo 0)
log "table (grid passed: $OK)"
if [ "$OK" = 1 ]; then
  timeout "${TABLE_S:-330}" python3 benchmarks/gluon_validate.py --bwd --grid none --rounds 5 --warmup 10 --rep 25 \
      --fwd-beside "$OFF" --out "$O/table.json" 2>&1 | quiet | tail -36
fi
log ncu forward fp16 d64 causal N=2048
timeout "${NCU_S:-100}" ncu --clock-control none --profile-from-start off --set full --import-source no -f \
    -o $W/ncu_fwd_fp16_d64_c_2048 python3 benchmarks/gluon_validate.py --out /dev/null --ncu fp16,64,1,2048 2>&1 \
    | grep -v "^==PROF==" | tail -3
ncu_summarise $W "$O/ncu_summary.txt"; head -c 2500 "$O/ncu_summary.txt"
log done
} 2>&1 | tee "$O/log.txt"
