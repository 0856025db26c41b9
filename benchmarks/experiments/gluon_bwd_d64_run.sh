#!/usr/bin/env bash
# One device call (H200) for issue 15's d=64 backward rows: 128-query blocks (BLOCK_M=128, 2 ring slots) at d=64, where
# the committed configuration takes 64 (the limiter profile: one serial chain per query block, latency-bound; 128
# halves the chains per CTA and doubles each wgmma's N). Offline (gluon_compile_sm90.py) the compute warps get 240
# registers by setmaxnreg and spill 20 B (loop-invariant values, 3 local loads per block) at 166 KB of shared memory.
# Each step a process of its own, everything written into $OUT as it goes:
#   1. the backward correctness grid (40 cases, ragged N 1-2085) with the candidate at d=64;
#   2. the GPU tests (tests/kernels/test_gluon.py: flash_backward's Gluon path now computes delta in the prologue);
#   3. the d=64 rows of the same-run table (fp16, bf16, N 2048-16384, 5 interleaved rounds): cuDNN, SDPA-flash, the
#      candidate and the committed configuration side by side;
#   4. ncu --set full of the fp16 d=64 non-causal N=2048 backward (committed, cuDNN, candidate), exported to CSV.
# Usage: OUT=/tmp/out bash benchmarks/experiments/gluon_bwd_d64_run.sh
source "$(dirname "$0")/gluon_run_common.sh"     # O, log, quiet, machine_header
W=/tmp/ncu_d64; mkdir -p $W
CAND=${CAND:-'{"BLOCK_M": 128, "STAGES": 2}'}
OVR="{\"d64_causal0\": $CAND, \"d64_causal1\": $CAND}"
{
log start
machine_header
log "grid with $OVR"
timeout "${GRID_S:-110}" python3 benchmarks/gluon_validate.py --bwd --no-timing --no-triton --grid bwd \
    --bwd-override "$OVR" --out "$O/grid.json" 2>&1 | quiet | tail -8
OK=$(python3 -c "import json; r = json.load(open('$O/grid.json')); c = r['checks']; \
print(int(len(c) == 40 and all(x['ok'] for x in c) and 'tuned_choice_failed_grid' not in r))" 2>/dev/null || echo 0)
log "pytest (grid passed: $OK)"
timeout "${PYTEST_S:-150}" python3 -m pytest -q -n 0 -p no:cacheprovider tests/kernels/test_gluon.py > "$O/pytest.txt" 2>&1
tail -3 "$O/pytest.txt"
if [ "$OK" = 1 ]; then
  log table, d=64 rows
  timeout "${TABLE_S:-240}" python3 benchmarks/gluon_validate.py --bwd --grid none --no-triton --ds 64 \
      --rounds 5 --warmup 10 --rep 25 --bwd-override "$OVR" --out "$O/table.json" 2>&1 | quiet | tail -22
fi
log ncu fp16 d64 non-causal N=2048
NCU="ncu --clock-control none --profile-from-start off --set full --import-source no -f"
FLASHSIM_NCU_BWD_CONFIG="$CAND" timeout "${NCU_S:-150}" $NCU -o $W/ncu_bwd_fp16_d64_nc_2048 \
    python3 benchmarks/gluon_validate.py --out /dev/null --ncu-bwd fp16,64,0,2048 2>&1 | grep -v "^==PROF==" | tail -3
ncu_summarise $W "$O/ncu_summary.txt"; head -c 3000 "$O/ncu_summary.txt"
log done
} 2>&1 | tee "$O/log.txt"
cd /tmp && tar czf "$O/ncu_csv.tar.gz" --exclude='*.ncu-rep' ncu_d64 2>/dev/null; ls -la "$O"
