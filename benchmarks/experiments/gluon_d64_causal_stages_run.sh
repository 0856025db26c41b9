#!/usr/bin/env bash
# One device call (H200), not yet run: the causal d=64 forward (0.96-0.97x cuDNN at N=2048 after section_lpt) with a
# third K slot, and a third K and V slot, beside the committed one (2 and 2), rows d=64 causal only. cuDNN's kernel
# there holds 134 KB of shared memory to our 99 KB (a third K/V slot pair is 32 KB); its consumers' stalls at N=2048
# are mostly in mbarrier waits (gluon_limiter_h200_2026-12-03_3.txt). STAGES=3 lost to 2 in the 2026-12-01 tuning,
# with ping-pong on and before the balanced lists; the committed entry has ping-pong off and section_lpt. Offline
# (triton 3.9, sm_90): no spills in either; 115 and 132 KB of shared memory (cuDNN 134 KB).
# Usage: OUT=/tmp/out [ROUNDS=7] bash benchmarks/experiments/gluon_d64_causal_stages_run.sh
source "$(dirname "$0")/gluon_run_common.sh"     # O, log, quiet, machine_header, override_grid_then_table
export TABLE_ARGS="--ds 64 --causals 1"
{
log start
machine_header
override_grid_then_table '{"d64_causal1": {"STAGES": 3, "V_STAGES": 2}}' "${ROUNDS:-7}" k3v2
override_grid_then_table '{"d64_causal1": {"STAGES": 3}}' "${ROUNDS:-7}" k3v3
log done
} 2>&1 | tee "$O/log.txt"
