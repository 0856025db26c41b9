#!/usr/bin/env bash
# The GPU calls' log filter, sourced by the device scripts (fa4_device_run.sh, gluon_bwd_override_run.sh): a call
# returns only the last 12,000 characters of its output, so the lines that repeat on every compile or launch go.
#   - Python's warnings (triton's FP-fusion default, torch's backward hooks, tensor-to-scalar conversions);
#   - nanobind's leak report, printed at the exit of every process that compiled a Gluon kernel.
quiet() {
  grep -v -e "UserWarning" -e "warn_once" -e "warnings.warn" -e "run_backward" -e "detach() first" -e "return float" \
    -e "leaked" -e "nanobind" -e "skipped remainder"
}
