#!/usr/bin/env bash
# One device call (H200), not yet run: the whole table timed both ways, to see whether timing every kernel once per
# iteration (each call on its own, --timing calls) narrows the ratios' spread that --timing rounds shows (one
# kernel's do_bench median moved 10-20 % between rounds of a row on 2026-12-03: gluon_kv_ring_h200_2026-12-03.json,
# the clock under the power limit), and whether the verdicts at parity rows (bf16 d=128 N=8192: equal times under
# ncu, 0.94-0.99x timed) change. Same code, same process order: rounds first, then calls.
# Usage: OUT=/tmp/out [ITERS=60] bash benchmarks/experiments/gluon_timing_calls_run.sh
source "$(dirname "$0")/gluon_run_common.sh"     # O, log, quiet, machine_header
{
log start
machine_header
log "table, --timing rounds (5)"
timeout 220 python3 benchmarks/gluon_validate.py --bwd --grid none --no-triton --rounds 5 --warmup 10 --rep 25 \
    --out "$O/table_rounds.json" 2>&1 | quiet | tail -3
log "table, --timing calls (${ITERS:-60})"
timeout 300 python3 benchmarks/gluon_validate.py --bwd --grid none --no-triton --timing calls --iters "${ITERS:-60}" \
    --warmup 10 --out "$O/table_calls.json" 2>&1 | quiet | tail -36
for f in rounds calls; do
  python3 benchmarks/experiments/gluon_table_md.py "$O/table_$f.json" | grep "rows meet"
done
log done
} 2>&1 | tee "$O/log.txt"
