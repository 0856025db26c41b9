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
