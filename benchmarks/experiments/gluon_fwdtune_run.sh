#!/usr/bin/env bash
# One device call (H200) for issue 15's forward target, each step a process of its own (a crash in one cannot
# leave the next with an unusable CUDA context):
#   1. the forward tuned per row: each (d, causal, N) that missed 1.0x cuDNN in the last same-run table
#      (gluon_h200_2026-12-02_4.json), both dtypes, its current configuration against ping-pong flipped and
#      gluon_validate.py's FWD_ROW_CANDIDATES, timed with cuDNN in interleaved rounds; a candidate is adopted where it
#      won by more than the rounds' min-max in both dtypes;
#   2. the same-run table (forward and backward, 32 rows) with the adopted configurations, the replaced ones timed
#      beside them in their rows, every kernel of a row in interleaved rounds.
# Every step writes its JSON after each row, so that a timeout still returns what ran.
# Usage: OUT=/tmp/out bash benchmarks/experiments/gluon_fwdtune_run.sh
set -u
export PYTHONUNBUFFERED=1
O=${OUT:-/tmp/out}; mkdir -p "$O"
log() { echo "== $(date -u +%H:%M:%S) $*"; }
quiet() { grep -v "UserWarning\|warn_once\|warnings.warn\|run_backward\|tensor.detach\|return float"; }
T=(--rounds "${ROUNDS:-5}" --warmup "${WARMUP:-10}" --rep "${REP:-25}")
{
log start
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
python3 -c "import torch, triton; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version(), triton.__version__)"
log tune forward rows
timeout "${TUNE_S:-165}" python3 benchmarks/gluon_validate.py --bwd --no-timing --no-triton --grid none "${T[@]}" \
    --tune-fwd-rows benchmarks/results/gluon_h200_2026-12-02_4.json --tune-budget-s "${TUNE_BUDGET_S:-125}" \
    --out "$O/tune.json" 2>&1 | quiet | grep "tune_fwd_row\|adopted\|Error\|error" | cut -c1-700
log table
timeout "${TABLE_S:-250}" python3 benchmarks/gluon_validate.py --bwd --grid none "${T[@]}" \
    --fwd-adopted "$O/tune.json" --out "$O/table.json" 2>&1 | quiet | tail -40
log done
} 2>&1 | tee "$O/log.txt"
