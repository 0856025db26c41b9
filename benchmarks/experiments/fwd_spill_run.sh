#!/usr/bin/env bash
# One device call (H200) for issue 13's flash_fwd write miss: (1) the forward at 128x128 tiles with 4 and 8 warps:
# spills as compiled, correctness, time (fwd_spill_h200.py); (2) ncu's local-memory and DRAM counters of the miss's
# shape with each; (3) the fidelity measurement of the flash_fwd configurations the launch policy changed or added
# (sets new2, new4, new5, new6). Everything goes to $OUT as it runs.
# Usage: OUT=/tmp/out bash benchmarks/experiments/fwd_spill_run.sh
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
O=${OUT:-/tmp/out}; mkdir -p "$O"
log() { echo "== $(date -u +%H:%M:%S) $*"; }
{
log start
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, triton; print(torch.__version__, torch.version.cuda, triton.__version__)"
git rev-parse HEAD 2>/dev/null || true
log spills and timing
timeout 150 python3 benchmarks/experiments/fwd_spill_h200.py --out "$O/fwd_spill.json" 2>&1 | grep -v Warning | tail -12
for w in 4 8; do
  log "ncu, $w warps"
  timeout 60 ncu --csv --print-units base --clock-control none --cache-control all -k regex:_flash_fwd_kernel \
    --metrics dram__bytes_write.sum,dram__bytes_read.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum,l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum,lts__t_sectors_srcunit_tex_op_write.sum,l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum,launch__registers_per_thread,gpu__time_duration.sum \
    python3 benchmarks/experiments/fwd_spill_h200.py --ncu-one $w 2>&1 | grep -v "^==PROF==" | grep '"' | tail -12
done
log fidelity flash_fwd
timeout 240 python3 benchmarks/fidelity_h200.py --kernels flash_fwd --sets new2,new4,new5,new6 --out "$O/fid" 2>&1 | tail -30
log done
} 2>&1 | tee "$O/log.txt"
