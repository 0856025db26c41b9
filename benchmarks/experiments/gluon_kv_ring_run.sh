#!/usr/bin/env bash
# One device call (H200) for issue 15's d=128 forward rows: a K ring of 3 slots beside a V ring of 2 (V_STAGES).
# cuDNN's d=128 forward holds 232 KB of shared memory per CTA (2026-12-02 profile) against our 197 KB; three K and
# three V slots do not fit beside the four Q buffers, three K and two V do (224 KiB), and K is needed one tile
# before V, so the spare slot goes to K. Steps, each a process of its own, written into $OUT as it goes:
#   1. the forward correctness grid with STAGES=3, V_STAGES=2 in both d=128 entries (40 cases, ragged N 1-2085);
#   2. if it passed (override_grid_then_table, which also prints the per-row ratios; the run of record wrote its grid
#      as grid.json): the whole table's rows (32, 5 interleaved rounds) with that override, the committed forward
#      timed beside it in the d=128 rows (gluon_committed_fwd); the d=64 rows time the committed forward (the
#      first GPU run of gluon_forward reading its blocks from fwd_constexprs).
# Usage: OUT=/tmp/out bash benchmarks/experiments/gluon_kv_ring_run.sh
source "$(dirname "$0")/gluon_run_common.sh"     # O, log, quiet, machine_header, override_grid_then_table
RING='{"STAGES": 3, "V_STAGES": 2}'
ALL="{\"d128_causal0\": $RING, \"d128_causal1\": $RING}"
{
log start
machine_header
override_grid_then_table "$ALL" 5 table
log done
} 2>&1 | tee "$O/log.txt"
