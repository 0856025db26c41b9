#!/usr/bin/env bash
# One GPU call (Hopper, no network): a Gluon backward option against the committed configuration, under the device
# image's triton and under the course's locked triton (3.9, carried as a stripped tarball), fp16, N=8192.
#
#   carry [".whl/t39"]:  TRITONS=39 OUT=$OUT bash benchmarks/gluon_bwd_override_run.sh
#   (the options queued for timing, below), or OVERRIDE='{"WG_LOCAL": true}' for one option of your own
#
# For each triton: the offline sm_90 compile of both configurations (registers, spills, barriers in the PTX), then
# benchmarks/gluon_validate.py --bwd with the override (the correctness grid under 3.9, where the kernels' barriers
# differ; then each row timed beside the committed configuration, median of 5 interleaved rounds). The 3.9 tarball
# (`bash benchmarks/triton_carry.sh` builds it): triton 3.9.0's cp312 wheel without its AMD backend, CUPTI and
# proton, its ptxas a link to ptxas-blackwell (CUDA 13.4); device_lib.sh's use_triton_site runs under it. Writes
# $OUT/override_t36.json and $OUT/override_t39.json.
# Several options in one call: OVERRIDES, JSON objects separated by ';' (each its own grid and rows beside the
# committed configuration, the call's time split between them; files override_t$T_0.json, _1, ...).
# Knobs: TRITONS ("36 39"; one of them alone when the call is short: "36" needs no carry, so it fits beside
# fa4_carry.sh's stash call), BUDGET_S (540: the whole call), FWD_OVERRIDE (unset; '{"d64_causal0": {...}}': those
# forward entries replaced too, each timed beside the committed one in its rows: gluon_validate's --fwd-override).
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"
# default: the options queued for timing, the best two of the offline screen (NOTES.md, "The exponentials and dS
# in one stretch"); name others in OVERRIDE (one) or OVERRIDES (several)
QUEUED='{"DV_LATE": true, "MASK_SPLIT": true};{"DV_LATE": true, "MASK_FIRST": true, "LSE_LOG2": true}'
IFS=';' read -r -a OVS <<< "${OVERRIDES:-${OVERRIDE:-$QUEUED}}"
TRITONS=${TRITONS:-36 39}
SITE39=${TRITON_SITE:-/tmp/site39}   # where 3.9 is unpacked (fa4_device_run.sh's TRITON_SITE can then name it)
export PYTHONUNBUFFERED=1
source "$(dirname "$0")/device_lib.sh"   # quiet: the log filter; use_triton_site
T0=$(date +%s); left() { echo $(( ${BUDGET_S:-540} - ($(date +%s) - T0) )); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
case " $TRITONS " in *" 39 "*)
  bash benchmarks/triton_carry.sh unpack "$SITE39"
esac
for T in $TRITONS; do
  # the correctness grid runs under 3.9 (where the barriers differ), and under 3.6 when it is the only triton
  export PYTHONPATH=$PWD
  if [ $T = 39 ]; then use_triton_site "$SITE39" || exit 4; export TRITON_CACHE_DIR=/tmp/tc39; GRID=bwd
  else unset TRITON_BACKENDS_IN_TREE; export TRITON_CACHE_DIR=/tmp/tc36
    GRID=$([ "$TRITONS" = 36 ] && echo bwd || echo none); fi
  python3 -c "import triton, torch; print('== triton', triton.__version__, 'torch', torch.__version__)"
  for c in '{}' "${OVS[@]}"; do
    python3 benchmarks/experiments/gluon_compile_sm90.py --bwd --cfg "$c" 2>&1 | quiet | grep '"kernel"' | cut -c1-220
  done
  for k in "${!OVS[@]}"; do
    # this triton's share of what is left, split over the overrides still to run
    B=$(( $(left) / (T == 36 && ${#TRITONS} > 2 ? 2 : 1) / (${#OVS[@]} - k) - 10 ))
    F="$O/override_t$T.json"; [ ${#OVS[@]} -gt 1 ] && F="$O/override_t${T}_$k.json"
    echo "== triton $T, ${OVS[$k]}: $B s for gluon_validate (grid $GRID)"
    timeout "$B" python3 benchmarks/gluon_validate.py --bwd --grid $GRID --bwd-override "${OVS[$k]}" --no-triton \
      ${FWD_OVERRIDE:+--fwd-override "$FWD_OVERRIDE"} \
      --ns 8192 --dtypes fp16 --rounds 5 --warmup 10 --rep 25 --out "$F" 2>&1 | quiet | tail -25
  done
done
