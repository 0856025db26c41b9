#!/usr/bin/env bash
# One device call (H200) for issue 15's causal d=64 forward rows: BALANCED="section_lpt" (each L2 section of the tile
# list dealt longest first before the next) against the committed "lpt" (longest first over the whole list). The
# 2026-12-03 ncu profile at fp16 N=4096 had our forward at 20.8 % of DRAM bandwidth with a 65 % L2 hit rate, cuDNN's
# at 8.5 % and 85 %; replayed on the host, "lpt" keeps ~42 heads' K/V (42 MB) in use at once, "section_lpt" ~20.
# Steps, written into $OUT as it goes:
#   1. the GPU test that every tile list gives the same output, bit for bit (section_lpt among them);
#   2. ncu --set full of the committed forward, the section_lpt one and cuDNN's at fp16 N=4096 and bf16 N=8192;
#   3. the causal d=64 rows (both dtypes, N=2048-16384, ROUNDS interleaved rounds, default 9) with section_lpt, the
#      committed forward beside it in every row; last, the per-row ratio.
# Usage: OUT=/tmp/out [ROUNDS=9] bash benchmarks/experiments/gluon_section_lpt_run.sh
source "$(dirname "$0")/gluon_run_common.sh"     # O, log, quiet, machine_header, ncu_summarise
SEC='{"BALANCED": "section_lpt"}'
W=/tmp/ncu_sec; mkdir -p $W
{
log start
machine_header
log pytest tile lists
timeout 150 python3 -m pytest -q -n 0 -p no:cacheprovider tests/kernels/test_gluon.py -k tile_lists > "$O/pytest.txt" 2>&1
tail -2 "$O/pytest.txt"
for row in fp16,64,1,4096 bf16,64,1,8192; do
  log "ncu forward $row"
  timeout 100 ncu --clock-control none --profile-from-start off --set full --import-source no -f \
      -o "$W/ncu_fwd_${row//,/_}" python3 benchmarks/gluon_validate.py --out /dev/null --ncu "$row" --ncu-config "$SEC" \
      2>&1 | grep -v "^==PROF==" | tail -2
done
ncu_summarise $W "$O/ncu_summary.txt"; grep "^###\|^- \[\|gpu_time" "$O/ncu_summary.txt" | cut -c1-260
log "table, d64 causal, $SEC"
timeout 240 python3 benchmarks/gluon_validate.py --bwd --grid none --no-triton --rounds "${ROUNDS:-9}" --warmup 10 \
    --rep 25 --ds 64 --causals 1 --fwd-override "{\"d64_causal1\": $SEC}" --out "$O/table.json" 2>&1 | quiet | tail -10
python3 benchmarks/experiments/gluon_vs_committed.py "$O/table.json"
log done
} 2>&1 | tee "$O/log.txt"
