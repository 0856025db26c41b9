#!/usr/bin/env bash
# One GPU call (Hopper, no network): Nsight Compute's shared-memory and tensor figures of the backward's main kernels,
# the course's Gluon backward beside cuDNN's and FlashAttention-4's, one launch each per row. It checks the reading
# of benchmarks/results/NOTES.md, "The backward's main loop beside FA4's": at d=128 the wgmmas' shared-memory reads
# would fill most of the SM's shared-memory bandwidth, in both kernels.
#
#   call 1, carry [".whl/fa4/a"]:  bash benchmarks/fa4_carry.sh stash .whl/fa4/a
#   call 2, carry [".whl/fa4/b"]:  OUT=$OUT bash benchmarks/gluon_bwd_ncu_run.sh
# Without call 1's stash FA4's column is absent. Knobs: ROWS (dtype,d,causal,N ...; default the d=128 pair and d=64),
# TRITON_SITE (the course's kernels under another triton, as in fa4_device_run.sh), BUDGET_S (540).
# Of the metrics it wants it asks ncu only for those this ncu knows (`ncu --query-metrics`), so that a renamed one
# costs its column, not the call. It also asks for every warp stall reason (a regex, so not checked that way) and
# prints each row's reasons side by side with ours' three idle warps set apart (benchmarks/gluon_bench/stalls.py,
# --raw). Writes $OUT/ncu_<row>.csv (ncu --csv --page raw), $OUT/log.txt; the tables last.
set -u -o pipefail
O=${OUT:-/tmp/out}; mkdir -p "$O"
source "$(dirname "$0")/device_lib.sh"   # quiet; use_triton_site
T0=$(date +%s); left() { echo $(( ${BUDGET_S:-540} - ($(date +%s) - T0) )); }
{
if ENV_LINE=$(bash benchmarks/fa4_carry.sh unpack .whl/fa4/b .whl/fa4/a 2>/dev/null); then eval "$ENV_LINE"
else echo "== FA4's wheels missing (no stash from call 1?): ours and cuDNN only"; fi
if [ -n "${TRITON_SITE:-}" ]; then use_triton_site "$TRITON_SITE" || exit 4; fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}   # FA4's kernel cache: set by gluon_bench.fa4 at import
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; ncu --version | tail -1
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
KNOWN=$(ncu --query-metrics 2>/dev/null | awk '{print $1}')
M=gpu__time_duration.sum
for m in sm__pipe_tensor_op_gmma_cycles_active sm__pipe_tensor_op_hmma_cycles_active \
         l1tex__data_bank_reads l1tex__data_bank_writes l1tex__data_pipe_lsu_wavefronts_mem_shared \
         sm__throughput smsp__inst_executed; do
  if grep -qx "$m" <<< "$KNOWN"; then
    case $m in smsp__inst_executed) M=$M,$m.sum;; *) M=$M,$m.avg.pct_of_peak_sustained_elapsed;; esac
  else echo "== not in this ncu: $m"; fi
done
# every stall reason, per issued instruction, and the cycles that set ours' idle warps apart (stalls.py --raw)
M="$M,regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio\$,smsp__cycles_active.avg"
echo "== metrics: $M"
for ROW in ${ROWS:-fp16,128,0,8192 fp16,128,1,8192 fp16,64,0,8192}; do
  [ "$(left)" -gt 40 ] || { echo "== out of time before $ROW"; break; }
  F=$O/ncu_${ROW//,/_}.csv
  timeout "$(( $(left) - 20 ))" ncu --clock-control none --profile-from-start off --metrics "$M" --csv --page raw \
    python3 benchmarks/gluon_validate.py --ncu-bwd "$ROW" --out /tmp/ncu_bwd.json > "$F" 2> "$F.err"
  echo "== $ROW: rc $? ($(left) s left)"; tail -3 "$F.err" | quiet
done
python3 - "$O"/ncu_*.csv <<'PY'
import sys
from benchmarks.gluon_bench.stalls import raw_page
for path in sys.argv[1:]:
    try:
        head, _, body = raw_page(path)      # names, units, one row per kernel
    except ValueError:
        body = []
    if not body:
        print(path, "no kernels"); continue
    # the metrics asked for (their .avg / .sum columns), not the device attributes --page raw adds
    cols = [i for i, h in enumerate(head) if h.startswith(("gpu__time_duration.sum", "sm__", "l1tex__", "smsp__"))
            and (".avg." in h or h.endswith(".sum"))]
    print(f"\n{path.rsplit('/', 1)[-1]}")
    print(" | ".join(["kernel"] + [head[i].split("__", 1)[1].split(".")[0][:32] for i in cols]))
    for r in body:
        name = r[head.index("Kernel Name")]
        print(" | ".join([name[:44]] + [r[i] for i in cols]))
PY
for F in "$O"/ncu_*.csv; do
  echo; echo "${F##*/}: warp stall reasons of the main kernels (1e9 warp-cycles)"
  python3 -m benchmarks.gluon_bench.stalls --raw "$F" --idle attn_bwd_sm90=3 2>&1 | tail -12
done
} 2>&1 | tee "$O/log.txt"
