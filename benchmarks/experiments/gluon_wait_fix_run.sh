#!/usr/bin/env bash
# One device call (H200) for issue 15's forward rows: the forward with PV_WAIT_BLOCK, where each consumer waits for
# the next K slot before it waits for the PV wgmma group. Offline (triton 3.9's ptxas, sm_90) the committed kernel
# has none of softmax(S_j)'s 64 exponentials between the two wgmma waits (ptxas scheduled the PV wait at the top of
# the softmax's basic block), PV_WAIT_BLOCK all of them (sass_wgmma_overlap.py), in all four entries.
# Steps, each a process of its own, written into $OUT as it goes:
#   1. the GPU tests (committed code; the first run since benchmarks/gluon_bench was split out of gluon_validate.py);
#   2. the device ptxas's SASS of both (gluon_fwd_sass.py);
#   3. the forward correctness grid with PV_WAIT_BLOCK in every entry (40 cases, ragged N 1-2085);
#   4. if it passed: the whole table's rows (32, 5 interleaved rounds) with PV_WAIT_BLOCK, the committed forward timed
#      beside it in every row (gluon_committed_fwd);
#   5. whether the causal d=64 forward with 3 K/V slots finishes (last session's grid timed out on it).
# Usage: OUT=/tmp/out bash benchmarks/experiments/gluon_wait_fix_run.sh
source "$(dirname "$0")/gluon_run_common.sh"     # O, log, quiet, machine_header
ALL='{"d64_causal0": {"PV_WAIT_BLOCK": true}, "d64_causal1": {"PV_WAIT_BLOCK": true}, "d128_causal0": {"PV_WAIT_BLOCK": true}, "d128_causal1": {"PV_WAIT_BLOCK": true}}'
{
log start
machine_header
log pytest
timeout "${PYTEST_S:-150}" python3 -m pytest -q -n 0 -p no:cacheprovider tests/kernels/test_gluon.py > "$O/pytest.txt" 2>&1
tail -3 "$O/pytest.txt"
log sass
for dc in "128 0" "64 1"; do
  set -- $dc
  rm -rf /tmp/tc_sass
  D=$1 CAUSAL=$2 TRITON_CACHE_DIR=/tmp/tc_sass timeout 120 python3 benchmarks/experiments/gluon_fwd_sass.py \
      '{"PV_WAIT_BLOCK": false}' '{"PV_WAIT_BLOCK": true}' 2>&1 | quiet | tail -4
done
log grid, PV_WAIT_BLOCK
timeout "${GRID_S:-120}" python3 benchmarks/gluon_validate.py --bwd --no-timing --no-triton --grid fwd \
    --fwd-override "$ALL" --out "$O/grid.json" 2>&1 | quiet | tail -4
OK=$(python3 -c "import json; c = json.load(open('$O/grid.json'))['checks']; \
print(int(len(c) == 40 and all(x['ok'] for x in c)))" 2>/dev/null || echo 0)
log "table (grid passed: $OK)"
if [ "$OK" = 1 ]; then
  timeout "${TABLE_S:-270}" python3 benchmarks/gluon_validate.py --bwd --grid none --no-triton --rounds 5 --warmup 10 \
      --rep 25 --fwd-override "$ALL" --out "$O/table.json" 2>&1 | quiet | tail -36
fi
log hang check, d=64 causal STAGES=3
TIMEOUT_S=60 timeout 150 python3 benchmarks/experiments/gluon_config_hang_check.py '{"STAGES": 3}' \
    '{"STAGES": 3, "BALANCED": false}' 2>&1 | quiet | tail -3
log done
} 2>&1 | tee "$O/log.txt"
