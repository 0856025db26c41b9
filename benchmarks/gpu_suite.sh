#!/usr/bin/env bash
# The whole test suite (`make test`'s tests: tests/, without the notebooks, which need nbmake) on a CUDA machine, in
# one call, with the machine's own python3 (no venv; flashsim from this checkout through PYTHONPATH). Every test runs
# on the device it finds or skips with its reason: the interpreter-only tests skip where a GPU compiles the kernels,
# the tests that need Jupyter, ipywidgets or Playwright skip where those are missing, and the packaging tests
# (wheels and venvs from the package index) skip under FLASHSIM_NO_INDEX=1, set here because a GPU machine of this
# kind reaches no network.
#
# Usage (device, repository root): bash benchmarks/gpu_suite.sh
#   writes $OUT/pytest_gpu_suite.txt (header: date, GPU, versions; then pytest's transcript with every skip reason
#   and the slowest tests) and $OUT/pytest_gpu_suite.xml (JUnit, one entry per test); commit both under
#   benchmarks/results/ as pytest_gpu_<gpu>_<date>.txt/.xml. The tests marked `counters` (device-wide hardware
#   counters, which other workers' kernels inflate) run after the parallel pass, alone, in the same transcript
#   (JUnit: $OUT/pytest_gpu_suite_counters.xml).
# Knobs: JOBS (pytest-xdist workers, default the CPU count, at most 16), PER_TEST_S (pytest-timeout per test, 300),
#   SUITE_S (the parallel pass, 480: SIGINT then, so pytest still prints its summary; the counters pass gets 120
#   more), PYTEST_ARGS (extra, e.g. "tests/kernels tests/measure" to run part of it), TRITON_SITE (unset: the
#   machine's triton; a folder with another one to test under, e.g. the course's locked triton that
#   `bash benchmarks/triton_carry.sh unpack` (carry [".whl/t39"]) put in /tmp/site39: what a learner who installs the
#   lock on a GPU gets).
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD" FLASHSIM_NO_INDEX=1 FLASHSIM_SIZE=small
export MPLBACKEND=Agg
source "$(dirname "$0")/device_lib.sh"   # use_triton_site
if [ -n "${TRITON_SITE:-}" ]; then use_triton_site "$TRITON_SITE" || exit 4; fi
export HYPOTHESIS_PROFILE=${HYPOTHESIS_PROFILE:-ci}    # the profile `make test` runs (tests/conftest.py)
unset TRITON_INTERPRET                                 # the backend decides by the machine, as for a learner
O=${OUT:-/tmp/out}; mkdir -p "$O"
T="$O/pytest_gpu_suite.txt"
JOBS=${JOBS:-$(python3 -c "import os; print(min(16, os.cpu_count() or 1))")}
timeout_flag=""
python3 -c "import pytest_timeout" 2>/dev/null && timeout_flag="--timeout=${PER_TEST_S:-300}"
{
  echo "# pytest of the whole suite on a CUDA machine, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "# GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
  python3 -c "import platform, torch, triton; print('# python', platform.python_version(), \
'| torch', torch.__version__, '| CUDA', torch.version.cuda, '| triton', triton.__version__, \
'| GPUs seen by torch', torch.cuda.device_count())" 2>&1
  echo "# ncu: $(command -v ncu >/dev/null 2>&1 && ncu --version | tail -1 || echo none)"
  # the commit, and how many paths differ from it (a device copy may carry an older commit's git metadata): the
  # `tree` every recorded result names (flashsim.measure.provenance.code_tree)
  echo "# tree: $(python3 -c "from flashsim.measure.provenance import code_tree; \
print(code_tree() or 'no git metadata (device copy of the working tree)')" 2>&1 | tail -1)"
  echo "# absent here (their tests skip): $(python3 -c "import importlib.util as u; print(' '.join(m for m in \
('ipywidgets', 'ipykernel', 'jupyterlab', 'nbformat', 'nbmake', 'playwright', 'importlinter', 'numba') \
if u.find_spec(m) is None) or 'none')")"
  echo "# command: python3 -m pytest -n $JOBS --dist loadgroup -p no:cacheprovider $timeout_flag -rfEs \
--durations=30 -q -m 'not counters' ${PYTEST_ARGS:-tests}, then -m counters alone \
(HYPOTHESIS_PROFILE=$HYPOTHESIS_PROFILE FLASHSIM_SIZE=small FLASHSIM_NO_INDEX=1${TRITON_SITE:+ \
TRITON_SITE=$TRITON_SITE})"
} > "$T"
cat "$T"
start=$(date +%s)
# the parallel pass, then the tests that read device-wide counters (marker `counters`) alone: other workers'
# kernels would add their DRAM traffic to the counters those tests compare with the model
timeout -s INT -k 40 "${SUITE_S:-480}" python3 -m pytest -n "$JOBS" --dist loadgroup -p no:cacheprovider \
    $timeout_flag -rfEs --durations=30 -q -m "not counters" --junitxml="$O/pytest_gpu_suite.xml" \
    ${PYTEST_ARGS:-tests} >> "$T" 2>&1
rc=$?
echo "# the counters pass, serial: python3 -m pytest -p no:cacheprovider -rfEs -q -m counters \
${PYTEST_ARGS:-tests}" >> "$T"
timeout -s INT -k 20 120 python3 -m pytest -p no:cacheprovider $timeout_flag -rfEs -q -m counters \
    --junitxml="$O/pytest_gpu_suite_counters.xml" ${PYTEST_ARGS:-tests} >> "$T" 2>&1
rc2=$?
[ $rc2 -eq 5 ] && rc2=0                       # no test selected (a PYTEST_ARGS without them)
[ $rc -eq 0 ] && rc=$rc2
echo "# pytest exit status $rc after $(( $(date +%s) - start )) s (124/130: stopped at SUITE_S=${SUITE_S:-480})" >> "$T"
# the end of the transcript in the call's reply: failures, the counts, the exit status
grep -E "^(FAILED|ERROR)" "$T" | head -40
grep -E "^=* ?[0-9]+ (passed|failed|skipped|error)|^# (pytest exit|the counters)" "$T" | tail -4
exit $rc
