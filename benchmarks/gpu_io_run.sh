#!/usr/bin/env bash
# The IO measurements on a second GPU (measured bytes against the simulated ones), by part, everything written
# into $OUT (at most 8 files come back):
#   holdout  the fidelity sweep (benchmarks/fidelity_h200.py) on a GPU the L2 model was not fitted on (an H100):
#            predictions for that GPU's SMs and L2, every constant as fitted on the H200; the write-back measurement
#            of the configurations of sets HOLDOUT_SETS (default fit, held_out, new4-new7: 83 configurations, all
#            five kernels) and ncu's window of set new5 -> $OUT/fidelity_<gpu>.json and .md (~5 min on an H200)
#   naive    chapter 02's recorded ncu comparison (and chapter 09's L2 table) re-recorded with the current kernels:
#            benchmarks/gpu_validate.py --part ncu --no-sim (the simulated side is computed at ingest), the sweep
#            flashsim/course/recorded/kernels_h200.json copies
#            -> $OUT/kern/kernels_h200.json and log.txt (~2.5 min on an H200; run it on the H200)
#   gluon    the Gluon kernels' launches of benchmarks/gluon_io/configs.json under ncu (requested and DRAM bytes)
#            -> $OUT/gluon_io.json (~3 min)
# Usage (device, repository root): PARTS="holdout" bash benchmarks/gpu_io_run.sh     (on nvidia-h100-x1)
#                                  PARTS="naive gluon" bash benchmarks/gpu_io_run.sh (on nvidia-h200)
# Then here: python benchmarks/gpu_io_ingest.py <the folder the files came back to> (see its --help).
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD"
O=${OUT:-/tmp/out}; mkdir -p "$O"
log() { echo "== $(date -u +%H:%M:%S) $*"; }
{
log "start: parts ${PARTS:-holdout}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
python3 -c "import torch, triton; print(torch.__version__, torch.version.cuda, triton.__version__)"
command -v ncu >/dev/null && ncu --version | tail -1
for part in ${PARTS:-holdout}; do
  case $part in
    holdout)
      log "holdout: fidelity sweep, sets ${HOLDOUT_SETS:-fit,held_out,new4,new5,new6,new7}"
      timeout "${HOLDOUT_S:-480}" python3 benchmarks/fidelity_h200.py --out "$O" --budget-s "${HOLDOUT_BUDGET_S:-400}" \
          --workers 12 --sets "${HOLDOUT_SETS:-fit,held_out,new4,new5,new6,new7}" --window-sets new5 2>&1 \
          | grep -v "^{\|^ \|^}" | tail -20
      rm -f "$O"/fidelity_*_partial.json ;;
    naive)
      log "naive: gpu_validate --part ncu"
      timeout "${NAIVE_S:-220}" python3 benchmarks/gpu_validate.py --part ncu --no-sim --out "$O/kern" 2>&1 \
        | tail -12 ;;
    gluon)
      log "gluon: ncu of the Gluon launches"
      timeout "${GLUON_S:-300}" python3 benchmarks/gluon_io/measure.py --timeout 140 --out "$O/gluon_io.json" 2>&1 \
        | tail -25 ;;
    *) echo "unknown part $part (holdout, naive, gluon)" ;;
  esac
done
log done
} 2>&1 | tee "$O/gpu_io_log.txt"
