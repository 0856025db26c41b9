#!/usr/bin/env bash
# One device call (H200) for issue 15's forward rows: S0_OVERLAP, where at a tile boundary each consumer issues the
# next tile's S_0 before this tile's last PV product and computes softmax(S_0) while that product runs (without it,
# softmax(S_0) runs with no product of either warpgroup in flight: both reach the boundary together, sharing the K/V
# slots). Offline (triton 3.9's ptxas, sm_90): 64 of the boundary's 64 exponentials sit under the PV wgmma
# (sass_wgmma_overlap.py); spills unchanged at d=64 causal (0 B), 72 -> 144 B at d=128, 228 -> 1004 B at d=64
# non-causal (3 consumers at 160 registers), so that entry keeps the committed forward.
# Steps, each a process of its own, written into $OUT as it goes:
#   0. the forward correctness grid of the committed configurations (the consumer's code was reorganised around the
#      option: tile-0 softmax and epilogue are functions now, for both paths);
#   1. the forward correctness grid with S0_OVERLAP in the d64 causal and both d128 entries (40 cases, N 1-2085;
#      override_grid_then_table: the run of record wrote it as grid.json),
#      the d64 causal entry also with BALANCED="section_lpt" (its CTAs deal each L2 section longest first before the
#      next: the 2026-12-03 ncu profile at N=4096 has our forward at 20.8 % of DRAM bandwidth and a 65 % L2 hit
#      rate against cuDNN's 8.5 % and 85 %; replayed on the host, "lpt" keeps ~42 heads' K/V in use, this ~20);
#   2. if it passed: the whole table's rows (32, ROUNDS interleaved rounds, default 7) with it, the committed forward
#      timed beside it in those entries' rows (gluon_committed_fwd); last, the per-row ratio to the committed one.
# The option is not in the package (measured, not adopted: benchmarks/results/gluon_s0_overlap_h200_2026-12-03.md);
# apply its patch first: git apply benchmarks/experiments/gluon_s0_overlap.patch
# Usage: OUT=/tmp/out [ROUNDS=7] bash benchmarks/experiments/gluon_s0_overlap_run.sh
source "$(dirname "$0")/gluon_run_common.sh"     # O, log, quiet, machine_header, override_grid_then_table
S0='{"S0_OVERLAP": true}'
S0SEC='{"S0_OVERLAP": true, "BALANCED": "section_lpt"}'
ALL="{\"d64_causal1\": $S0SEC, \"d128_causal0\": $S0, \"d128_causal1\": $S0}"
{
log start
machine_header
log "grid, committed configurations"
timeout "${GRID_S:-150}" python3 benchmarks/gluon_validate.py --bwd --no-timing --no-triton --grid fwd \
    --out "$O/grid_committed.json" 2>&1 | quiet | tail -2
override_grid_then_table "$ALL" "${ROUNDS:-7}" table
log done
} 2>&1 | tee "$O/log.txt"
