#!/usr/bin/env bash
# What the device scripts (fa4_device_run.sh, gluon_bwd_override_run.sh, gluon_bwd_ncu_run.sh, gpu_suite.sh) share;
# they source it.
#
# quiet: the GPU calls' log filter. A call returns only the last 12,000 characters of its output, so the lines that
# repeat on every compile or launch go:
#   - Python's warnings (triton's FP-fusion default, torch's backward hooks, tensor-to-scalar conversions);
#   - nanobind's leak report, printed at the exit of every process that compiled a Gluon kernel.
quiet() {
  grep -v -e "UserWarning" -e "warn_once" -e "warnings.warn" -e "run_backward" -e "detach() first" -e "return float" \
    -e "leaked" -e "nanobind" -e "skipped remainder"
}

# use_triton_site SITE: run what follows under the triton in SITE (e.g. the course's locked triton, which
# `bash benchmarks/triton_carry.sh unpack` puts in /tmp/site39) instead of the machine's. SITE goes first on
# PYTHONPATH; TRITON_BACKENDS_IN_TREE=1 because the tarball's backends sit in its tree without the wheel's entry
# points. Returns 1, with the fix named, when SITE holds no triton (the unpack call did not run on this machine).
use_triton_site() {
  if [ ! -f "$1/triton/__init__.py" ]; then
    echo "use_triton_site: no triton in $1; unpack it first on this machine: bash benchmarks/triton_carry.sh unpack" \
      "$1 (carry [\".whl/t39\"])" >&2
    return 1
  fi
  export PYTHONPATH=$1${PYTHONPATH:+:$PYTHONPATH} TRITON_BACKENDS_IN_TREE=1
}
