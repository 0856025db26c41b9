#!/usr/bin/env bash
# One device call (H200): the causal d=64 Gluon forward with 3 and 4 K/V ring slots (committed: 2), each after the
# forward correctness grid with it, timed beside the committed configuration in the d=64 causal rows (5 interleaved
# rounds). Why: its ncu profile at N=2048 (gluon_limiter_h200_2026-12-03_3.txt) has 12.6 % of the stall samples on
# mbarrier try-wait loops; at d=64 a K/V slot pair is 32 KB, so 4 slots still fit (164 KB of shared memory).
# Usage: OUT=/tmp/out bash benchmarks/experiments/gluon_fwd_stages_run.sh
source "$(dirname "$0")/gluon_run_common.sh"     # O, log, quiet, machine_header
{
log start
for S in 3 4; do
  OVR="{\"d64_causal1\": {\"STAGES\": $S}}"
  log "grid, STAGES=$S"
  timeout 100 python3 benchmarks/gluon_validate.py --bwd --no-timing --no-triton --grid fwd --fwd-override "$OVR" \
      --out "$O/grid_s$S.json" 2>&1 | quiet | tail -2
  OK=$(python3 -c "import json; c = json.load(open('$O/grid_s$S.json'))['checks']; \
print(int(len(c) == 40 and all(x['ok'] for x in c)))" 2>/dev/null || echo 0)
  log "rows, STAGES=$S (grid passed: $OK)"
  if [ "$OK" = 1 ]; then
    timeout 100 python3 benchmarks/gluon_validate.py --bwd --grid none --no-triton --rounds 5 --warmup 10 --rep 25 \
        --ds 64 --causals 1 --fwd-override "$OVR" --out "$O/rows_s$S.json" 2>&1 | quiet | tail -10
  fi
done
log done
} 2>&1 | tee "$O/log.txt"
