#!/usr/bin/env bash
# One device call (H200): the GPU tests with a timeout long enough for a cold compile cache, then ncu --set full of
# the committed Gluon forward beside cuDNN's at the rows given as ROWS (dtype,d,causal,N ...; default the bf16 d=128
# non-causal N=8192 row, 0.91-0.95x cuDNN in the last two tables), summarised (launch configuration, shared memory,
# registers, tensor-pipe share, stalls). Written into $OUT as it goes.
# Usage: OUT=/tmp/out [ROWS="bf16,128,0,8192"] bash benchmarks/experiments/gluon_ncu_fwd_run.sh
source "$(dirname "$0")/gluon_run_common.sh"     # O, log, quiet, machine_header, ncu_summarise
W=/tmp/ncu_fwd; mkdir -p $W
{
log start
machine_header
log pytest
timeout "${PYTEST_S:-330}" python3 -m pytest -q -n 0 -p no:cacheprovider tests/kernels/test_gluon.py > "$O/pytest.txt" 2>&1
tail -3 "$O/pytest.txt"
for row in ${ROWS:-bf16,128,0,8192}; do
  log "ncu forward $row"
  timeout "${NCU_S:-120}" ncu --clock-control none --profile-from-start off --set full --import-source no -f \
      -o "$W/ncu_fwd_${row//,/_}" python3 benchmarks/gluon_validate.py --out /dev/null --ncu "$row" 2>&1 \
      | grep -v "^==PROF==" | tail -3
done
ncu_summarise $W "$O/ncu_summary.txt"; head -c 3000 "$O/ncu_summary.txt"
log done
} 2>&1 | tee "$O/log.txt"
