#!/usr/bin/env bash
# One device call (H200): compile report, backward tuning (the BWD_CANDIDATES of gluon_validate.py, each checked first) with the
# correctness grid, and ncu limiter profiles (--set full, source counters) of the Gluon forward and backward and of
# cuDNN's kernels at the same shapes. Everything lands in W, packed into $OUT/limiter.tar.gz (the device returns
# at most 8 files). Usage: bash benchmarks/experiments/gluon_limiter_run.sh   (results: benchmarks/results/gluon_limiter_*)
# The second backward profiled is the LSE_SMEM variant (the 2026-12-02 profile, at 1e0974a, profiled the SPLIT option,
# since removed from the kernel).
set -u
export PYTHONUNBUFFERED=1
W=/tmp/lim; mkdir -p $W
log() { echo "== $(date -u +%H:%M:%S) $*"; }
{
log start; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
python3 -c "import torch, triton; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version(), triton.__version__)"
ncu --version | tail -1
log compile report, in the background
( for c in '{}' '{"LSE_SMEM": true}' '{"PIPE": true}'; do
    timeout 90 python3 benchmarks/experiments/gluon_compile_sm90.py --bwd --cfg "$c" --sass $W/sass 2>&1 | grep '^{'
  done
  timeout 60 python3 benchmarks/experiments/gluon_compile_sm90.py --fwd --d 128 --causal 0 --sass $W/sass 2>&1 | grep '^{'
) > $W/compile_report.jsonl 2>&1 &
log tune + grid
timeout ${TUNE_S:-200} python3 benchmarks/gluon_validate.py --bwd --tune --no-timing --rep 40 --out $W/tune.json 2>&1 | grep -v "^ *warn\|UserWarning"
NCU="ncu --clock-control none --profile-from-start off --set full --import-source no -f"
log ncu fwd
timeout 90 $NCU -o $W/ncu_fwd_fp16_d128_nc_2048 python3 benchmarks/gluon_validate.py --out /dev/null --ncu fp16,128,0,2048 2>&1 | grep -v "^==PROF==" | tail -5
log ncu bwd d128 causal
FLASHSIM_NCU_BWD_CONFIG='{"LSE_SMEM": true}' timeout 110 $NCU -o $W/ncu_bwd_fp16_d128_c_4096 python3 benchmarks/gluon_validate.py --out /dev/null --ncu-bwd fp16,128,1,4096 2>&1 | grep -v "^==PROF==" | tail -5
log ncu bwd d64 non-causal
FLASHSIM_NCU_BWD_CONFIG='{"LSE_SMEM": true}' timeout 90 $NCU -o $W/ncu_bwd_fp16_d64_nc_4096 python3 benchmarks/gluon_validate.py --out /dev/null --ncu-bwd fp16,64,0,4096 2>&1 | grep -v "^==PROF==" | tail -5
log export
for r in $W/*.ncu-rep; do
  b=${r%.ncu-rep}
  timeout 40 ncu -i $r --page details --csv > $b.details.csv 2>&1
  timeout 40 ncu -i $r --page raw --csv > $b.raw.csv 2>&1
  timeout 60 ncu -i $r --page source --csv --print-source sass -k regex:attn > $b.source_attn.csv 2>&1
done
wait
cat $W/compile_report.jsonl
ls -la $W
log done
} 2>&1 | tee $W/log.txt
cd /tmp && tar czf $OUT/limiter.tar.gz --exclude='*.sass' lim 2>/dev/null
ls -la $OUT; du -sh $OUT/limiter.tar.gz
if [ $(stat -c %s $OUT/limiter.tar.gz) -gt 15000000 ]; then
  tar czf $OUT/limiter.tar.gz --exclude='*.ncu-rep' --exclude='*.sass' lim; du -sh $OUT/limiter.tar.gz
fi
cp $W/log.txt $W/tune.json $OUT/ 2>/dev/null
