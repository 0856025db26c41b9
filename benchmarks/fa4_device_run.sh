#!/usr/bin/env bash
# One GPU call (H100 or H200, no network): FlashAttention-4 beside cuDNN, SDPA and the course's kernels at N = 8192
# (NS), B*N = 16384, H*d = 2048, fp16 and bf16, d 64 and 128, causal or not, forward and backward; correctness first
# in every row (each against float64, within 2x torch's error), then every implementation timed once per round in a
# fresh order, ROUNDS rounds (median; ratios per round). Writes into $OUT: attention_speed_<date>.json and .md,
# log.txt, and, with the time left, gluon_fa4.json (the Gluon tables' same-run rows with FA4's columns).
#
# FA4's wheels come in two calls (benchmarks/fa4_wheels.py), back to back on one warm machine (it is given back 30 s
# after a call ends, and /tmp with it):
#   call 1, carry [".whl/fa4/a"]:  bash benchmarks/fa4_carry.sh stash .whl/fa4/a && nvidia-smi -L && python3 -c "..."
#   call 2, carry [".whl/fa4/b"]:  OUT=$OUT bash benchmarks/fa4_device_run.sh
# A further call on the same warm machine needs no carry (both parts are in the stash by then), e.g. NS=4096.
# Each carry plus the working tree must stay under ~60 MiB (fa4_wheels.py prints both sums). Without call 1's stash
# (call 2 came to a fresh machine) it stops at once (exit 3) unless NO_FA4_OK=1 (then FA4's column is absent).
# Knobs:
#   NS (8192): comma-separated sequence lengths; the whole grid at one N fills about one call, so each N gets its own;
#   ROUNDS (5); BUDGET_S (560: the whole call); WARM_S (200: the parallel compile);
#   GLUON_S (0): seconds kept for gluon_validate's table with FA4;
#   TRITON_SITE (unset: the machine's triton): a folder with another triton to run the course's kernels under, e.g.
#   the lock's 3.9 that `bash benchmarks/triton_carry.sh unpack` (carry [".whl/t39"]) put in /tmp/site39 on this
#   machine: its tarball and FA4's part B do not fit one carry, so that call goes between the two of FA4.
set -u -o pipefail
export PYTHONUNBUFFERED=1
O=${OUT:-/tmp/out}; mkdir -p "$O"
ROUNDS=${ROUNDS:-5}
NS_SET=${NS:+1}; NS=${NS:-8192}   # NS_SET: the command recorded names NS only when it was given
log() { echo "== $(date -u +%H:%M:%S) $*"; }
source "$(dirname "$0")/device_lib.sh"   # quiet: the log filter; use_triton_site
T0=$(date +%s)
left() { echo $(( ${BUDGET_S:-560} - ($(date +%s) - T0) )); }
{
log start
if ENV_LINE=$(bash benchmarks/fa4_carry.sh unpack .whl/fa4/b .whl/fa4/a); then
  eval "$ENV_LINE"
elif [ "${NO_FA4_OK:-0}" = 1 ]; then
  log "FA4 wheels missing or broken: the run goes on without FA4 (NO_FA4_OK=1)"
else
  # a fresh machine (call 1's stash went with the last one): stop now rather than spend the call on a table
  # without the column it is for; repeat call 1 and then this call at once
  log "FA4 wheels missing or broken (no stash from call 1 on this machine?): stopping; NO_FA4_OK=1 runs anyway"
  exit 3
fi
if [ -n "${TRITON_SITE:-}" ]; then
  use_triton_site "$TRITON_SITE" || exit 4
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED=1 FLASH_ATTENTION_CUTE_DSL_CACHE_DIR=/tmp/fa4_cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
python3 -c "import torch, triton; print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'cuDNN', \
torch.backends.cudnn.version(), 'triton', triton.__version__)"
python3 -c "import cutlass, flash_attn.cute as f; print('cutlass-dsl', cutlass.__version__, 'flash_attn.cute', \
f.__file__)" 2>&1 | tail -3
log "compile the grid's kernels (FA4's, the course's) in parallel, into their disk caches"
timeout "${WARM_S:-200}" python3 -m benchmarks.gluon_bench.fa4 --warm --n "${NS%%,*}" --jobs 8 \
    --timeout-s "${WARM_S:-200}" \
    2>&1 | quiet | cut -c1-400
log "attention_speed: N=$NS, $ROUNDS rounds ($(left) s left)"
# rows start only while --budget-s lasts (the JSON and markdown are rewritten after every row); timeout is the backstop
timeout "$(( $(left) - ${GLUON_S:-0} - 10 ))" python3 benchmarks/attention_speed.py --out "$O" --ns "$NS" \
    --rounds "$ROUNDS" --warmup 10 --rep 25 --budget-s "$(( $(left) - ${GLUON_S:-0} - 60 ))" \
    --command "${TRITON_SITE:+TRITON_SITE=$TRITON_SITE }${NS_SET:+NS=$NS }OUT=\$OUT bash benchmarks/fa4_device_run.sh" \
    2>&1 | quiet | grep -v "^attention_speed:" | tail -40
if [ "${GLUON_S:-0}" -gt 0 ] && [ "$(left)" -gt 60 ]; then
  log "gluon_validate --bwd: the Gluon tables' rows with FA4 ($(left) s left)"
  timeout "$(( $(left) - 5 ))" python3 benchmarks/gluon_validate.py --bwd --grid none --ns "$NS" --rounds "$ROUNDS" \
      --warmup 10 --rep 25 --out "$O/gluon_fa4.json" 2>&1 | quiet | tail -12
fi
log done
} 2>&1 | tee "$O/log.txt"
