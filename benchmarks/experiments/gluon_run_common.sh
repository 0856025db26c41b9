# Sourced by the gluon_*_run.sh device scripts (`source "$(dirname "$0")/gluon_run_common.sh"`): the output folder O
# ($OUT, else /tmp/out), `log` (a line with the UTC time), `quiet` (drops torch's warning lines from a step's output)
# and `machine_header` (GPU, driver, clocks, power limit; torch, CUDA, cuDNN, triton; ncu where it is installed).
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
