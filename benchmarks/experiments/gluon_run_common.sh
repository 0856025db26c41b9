# Sourced by the gluon_*_run.sh device scripts (`source "$(dirname "$0")/gluon_run_common.sh"`): the output folder O
# ($OUT, else /tmp/out), `log` (a line with the UTC time), `quiet` (drops torch's warning lines from a step's output)
# `machine_header` (GPU, driver, clocks, power limit; torch, CUDA, cuDNN, triton; ncu where it is installed) and
# `ncu_summarise` (ncu reports to CSV and their summary).
set -u
export PYTHONUNBUFFERED=1
O=${OUT:-/tmp/out}; mkdir -p "$O"
log() { echo "== $(date -u +%H:%M:%S) $*"; }
quiet() { grep -v "UserWarning\|warn_once\|warnings.warn\|run_backward\|detach() first\|return float"; }
machine_header() {
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
  python3 -c "import torch, triton; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version(), triton.__version__)"
  if command -v ncu >/dev/null 2>&1; then ncu --version | tail -1; fi
}
# ncu_summarise DIR OUTFILE: export every .ncu-rep in DIR (raw page, and the SASS source page of the attention
# kernels) next to it as CSV, and write gluon_limiter_summary.py's summary of them to OUTFILE
ncu_summarise() {
  local r b
  for r in "$1"/*.ncu-rep; do
    b=${r%.ncu-rep}
    timeout 40 ncu -i "$r" --page raw --csv > "$b.raw.csv" 2>&1
    timeout 60 ncu -i "$r" --page source --csv --print-source sass -k regex:attn > "$b.source_attn.csv" 2>&1
  done
  python3 benchmarks/experiments/gluon_limiter_summary.py "$1" > "$2" 2>&1
}
# override_grid_then_table OVERRIDE ROUNDS NAME: the forward correctness grid with the --fwd-override entries OVERRIDE
# ($O/NAME_grid.json; all 40 cases must pass), then the whole table's rows with them (or those TABLE_ARGS selects,
# e.g. TABLE_ARGS="--ds 64 --causals 1"), ROUNDS interleaved rounds, the configurations they replace timed beside
# them ($O/NAME.json), and gluon_vs_committed.py's per-row ratios
override_grid_then_table() {
  local ok
  log "grid, $1"
  timeout "${GRID_S:-150}" python3 benchmarks/gluon_validate.py --bwd --no-timing --no-triton --grid fwd \
      --fwd-override "$1" --out "$O/$3_grid.json" 2>&1 | quiet | tail -4
  ok=$(python3 -c "import json; c = json.load(open('$O/$3_grid.json'))['checks']; \
print(int(len(c) == 40 and all(x['ok'] for x in c)))" 2>/dev/null || echo 0)
  log "table (grid passed: $ok)"
  if [ "$ok" = 1 ]; then
    timeout "${TABLE_S:-380}" python3 benchmarks/gluon_validate.py --bwd --grid none --no-triton --rounds "$2" \
        --warmup 10 --rep 25 --fwd-override "$1" ${TABLE_ARGS:-} --out "$O/$3.json" 2>&1 | quiet | tail -36
    python3 benchmarks/experiments/gluon_vs_committed.py "$O/$3.json"
  fi
}
