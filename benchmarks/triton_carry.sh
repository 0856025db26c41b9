#!/usr/bin/env bash
# The course's locked triton for a GPU machine whose image has another one (no network there): builds
# .whl/t39/triton39.tar.xz, which `benchmarks/gluon_bwd_override_run.sh` (TRITONS=39) unpacks into /tmp/site39 and
# `benchmarks/fa4_device_run.sh` (TRITON_SITE=/tmp/site39) then runs the course's kernels under.
#
#   bash benchmarks/triton_carry.sh [build]        # here, where pip reaches PyPI; prints the carry's MiB
#   bash benchmarks/triton_carry.sh unpack [SITE]  # the GPU machine, carry [".whl/t39"]: into SITE (/tmp/site39)
#
# One carry holds at most ~60 MiB with the working tree, and triton's wheel unpacks to about 1 GB, so the tarball
# keeps what compiles and launches sm_90 kernels and drops the rest:
# - the AMD backend, CUPTI (both flavours), proton (libproton.so, triton/profiler), the test and plugin libraries
#   (instrumentation/, plugins/, FileCheck), the MLIR headers (include/triton), nvdisasm and cuobjdump;
# - triton's own `ptxas` (CUDA 12.9, which 3.9 uses only before sm_90) becomes a link to its `ptxas-blackwell`
#   (CUDA 13.4, what 3.9 runs for sm_90), so nothing that compiles for Hopper changes;
# - libtriton.so loses its unneeded symbols (`strip --strip-unneeded`: 500 -> 190 MB).
# Then xz -9e: about 49 MiB. The GPU side needs TRITON_BACKENDS_IN_TREE=1 (the wheel's entry points are not
# installed). The version is the lock's (requirements/lock.txt); the wheel is CPython 3.12's, the GPU image's Python.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${TRITON_TARBALL:-.whl/t39/triton39.tar.xz}   # what build writes and unpack reads
if [ "${1:-build}" = unpack ]; then
  SITE=${2:-/tmp/site39}
  mkdir -p "$SITE"
  [ -f "$OUT" ] || { echo "triton_carry: no $OUT (carry [\".whl/t39\"]; build it with: bash $0)" >&2; exit 1; }
  tar xJf "$OUT" -C "$SITE"
  chmod +x "$SITE"/triton/backends/nvidia/bin/*
  VER=$(sed -n 's/^Version: //p' "$SITE"/triton-*.dist-info/METADATA)
  echo "triton_carry: $VER in $SITE (with TRITON_BACKENDS_IN_TREE=1)" >&2
  exit 0
elif [ "${1:-build}" != build ]; then
  echo "usage: $0 [build] | unpack [SITE]" >&2
  exit 2
fi
VERSION=$(sed -n 's/^triton==\([^ ;#]*\).*/\1/p' requirements/lock.txt)
PY=${PYTHON:-.venv/bin/python}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
"$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 "triton==$VERSION" -d "$WORK"
mkdir "$WORK/x"
"$PY" -m zipfile -e "$WORK"/triton-"$VERSION"-*.whl "$WORK/x"
cd "$WORK/x"
rm -rf triton/backends/amd triton/backends/nvidia/lib/cupti triton/backends/nvidia/lib/cupti-blackwell \
       triton/_C/libproton.so triton/profiler triton/instrumentation triton/plugins triton/FileCheck \
       triton/include/triton triton/backends/nvidia/bin/nvdisasm triton/backends/nvidia/bin/cuobjdump
ln -sf ptxas-blackwell triton/backends/nvidia/bin/ptxas
chmod +x triton/backends/nvidia/bin/*
strip --strip-unneeded triton/_C/libtriton.so
cd - >/dev/null
mkdir -p "$(dirname "$OUT")"
tar cf - -C "$WORK/x" . | xz -9e -T0 > "$OUT"
MIB=$(( $(stat -c %s "$OUT") / 1048576 ))
TREE=$(( $(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1) / 1048576 ))
echo "$OUT: triton $VERSION, $MIB MiB + working tree $TREE MiB = $(( MIB + TREE )) MiB (one carry holds ~60)"
