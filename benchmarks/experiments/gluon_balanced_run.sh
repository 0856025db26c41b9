#!/usr/bin/env bash
# One device call (H200) for issue 15's forward rows: the persistent forward's tiles dealt out by the host
# (BALANCED, flashsim.kernels.gluon.balanced_tile_lists) instead of a fixed stride, for the causal entries (where
# the tiles' lengths differ). Offline, under a cost of (K/V tiles + 1) per tile, the fixed stride's busiest CTA has
# 1.03-1.07x the mean work (1.29x at d=128 N=16384), "list" 1.00-1.05x, "lpt" 1.00-1.01x.
# Each step a process of its own, written into $OUT as it goes:
#   1. the correctness grid, forward and backward (80 cases, ragged N 1-2085), with BALANCED="lpt" for the causal
#      entries; 2. the GPU tests;
#   3. the whole same-run table (32 rows, forward and backward, 5 interleaved rounds) with "lpt", the committed
#      forward (fixed stride) timed beside it in each causal row;
#   4. the causal rows again with "list" beside the fixed stride.
# Usage: OUT=/tmp/out bash benchmarks/experiments/gluon_balanced_run.sh
source "$(dirname "$0")/gluon_run_common.sh"     # O, log, quiet, machine_header
ovr() { echo "{\"d64_causal1\": {\"BALANCED\": \"$1\"}, \"d128_causal1\": {\"BALANCED\": \"$1\"}}"; }
{
log start
machine_header
log grid, lpt
timeout "${GRID_S:-150}" python3 benchmarks/gluon_validate.py --bwd --no-timing --no-triton --grid bwd,fwd \
    --fwd-override "$(ovr lpt)" --out "$O/grid.json" 2>&1 | quiet | tail -6
OK=$(python3 -c "import json; r = json.load(open('$O/grid.json')); c = r['checks']; \
print(int(len(c) == 80 and all(x['ok'] for x in c)))" 2>/dev/null || echo 0)
log "pytest (grid passed: $OK)"
timeout "${PYTEST_S:-150}" python3 -m pytest -q -n 0 -p no:cacheprovider tests/kernels/test_gluon.py > "$O/pytest.txt" 2>&1
tail -3 "$O/pytest.txt"
if [ "$OK" = 1 ]; then
  log table, lpt
  timeout "${TABLE_S:-270}" python3 benchmarks/gluon_validate.py --bwd --grid none --no-triton --rounds 5 --warmup 10 \
      --rep 25 --fwd-override "$(ovr lpt)" --out "$O/table.json" 2>&1 | quiet | tail -36
  log causal rows, list
  timeout "${TABLE2_S:-150}" python3 benchmarks/gluon_validate.py --bwd --grid none --no-triton --rounds 5 \
      --warmup 10 --rep 25 --causals 1 --fwd-override "$(ovr list)" --out "$O/table_list.json" 2>&1 | quiet | tail -18
fi
log done
} 2>&1 | tee "$O/log.txt"
