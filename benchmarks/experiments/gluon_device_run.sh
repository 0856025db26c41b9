#!/usr/bin/env bash
# One device call (H200) for issue 15, each step a process of its own (an illegal instruction leaves a process's
# CUDA context unusable, so a crash in one step cannot fail the next):
#   1. the backward correctness grid with L/delta through shared memory (LSE_SMEM);
#   2. the same-run table with the forward's grid: forward (cuDNN, SDPA-flash, Triton, Gluon, Gluon without
#      ping-pong in fp16 rows), backward (cuDNN, SDPA-flash, Triton in fp16 rows, Gluon with LSE_SMEM where its whole
#      grid passed, the committed configurations timed beside it in each row);
#   3. the GPU tests; 4. the backward grid with the committed configurations; 5. with the time left, the backward
#      candidates of gluon_validate.py's BWD_CANDIDATES (each checked at N = 100 and 1000, then timed at 2048 and
#      16384, fp16), no grid or table.
# Everything is written into $OUT as it goes, so that a timeout still returns what ran.
# Usage: OUT=/tmp/out bash benchmarks/experiments/gluon_device_run.sh
source "$(dirname "$0")/gluon_run_common.sh"     # O, log, quiet, machine_header
{
log start
machine_header
log grid, LSE_SMEM
timeout "${GRID_S:-100}" python3 benchmarks/gluon_validate.py --bwd --no-timing --no-triton --grid bwd \
    --bwd-override '{"LSE_SMEM": true}' --out "$O/grid_lse_smem.json" 2>&1 | quiet | tail -25
LSE_OK=$(python3 -c "import json; r = json.load(open('$O/grid_lse_smem.json')); c = r['checks']; \
print(int(len(c) == 40 and all(x['ok'] for x in c) and 'tuned_choice_failed_grid' not in r))" 2>/dev/null || echo 0)
log "table, with the forward's grid (LSE_SMEM grid passed: $LSE_OK)"
if [ "$LSE_OK" = 1 ]; then OVR=(--bwd-override '{"LSE_SMEM": true}'); else OVR=(); fi
timeout "${TABLE_S:-270}" python3 benchmarks/gluon_validate.py --bwd --grid fwd --rep 60 "${OVR[@]}" \
    --out "$O/table.json" 2>&1 | quiet | tail -45
log pytest
timeout "${PYTEST_S:-140}" python3 -m pytest -q -n 0 -p no:cacheprovider tests/kernels/test_gluon.py > "$O/pytest.txt" 2>&1
tail -3 "$O/pytest.txt"
log grid, committed configurations
timeout "${GRID2_S:-80}" python3 benchmarks/gluon_validate.py --bwd --no-timing --no-triton --grid bwd \
    --out "$O/grid_default.json" 2>&1 | quiet | tail -25
log tune
timeout "${TUNE_S:-120}" python3 benchmarks/gluon_validate.py --bwd --tune --no-timing --grid none --rep 60 \
    --out "$O/tune.json" 2>&1 | quiet | grep "tune_bwd\|chosen" | cut -c1-400
log done
} 2>&1 | tee "$O/log.txt"
