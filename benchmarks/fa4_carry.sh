#!/usr/bin/env bash
# The GPU machine's side of benchmarks/fa4_wheels.py: FlashAttention-4's wheels arrive in two calls (each carry holds
# at most ~60 MiB with the working tree), are joined, checked and unpacked with the standard library alone.
#
#   bash benchmarks/fa4_carry.sh stash .whl/fa4/a     # call 1: keep part A in $FA4_STASH (default /tmp/fa4_stash)
#   eval "$(bash benchmarks/fa4_carry.sh unpack .whl/fa4/b)" # call 2: join A+B, check, unzip; sets PYTHONPATH
#
# unpack DIR...: the files of every DIR that exists are added to the stash first (so `unpack .whl/fa4/b .whl/fa4/a`
# also works where call 1's carried folder outlived the stash).
#
# unpack: every split wheel (NAME.whl.part0, .part1, ...) is joined in part order, every wheel is checked against
# SHA256SUMS (a missing or stale part fails here, not as a strange import error later) and extracted with
# `python3 -m zipfile -e` into one folder ($FA4_SITE, default /tmp/fa4_site): pip's --target would replace the folder
# nvidia_cutlass_dsl/ that three of the wheels share. Its one line on stdout puts that folder and
# nvidia_cutlass_dsl/dsl_packages (where the `cutlass` package lives; the wheel's .pth file, which would add it, is
# not read from PYTHONPATH) in front of PYTHONPATH. Everything else goes to stderr.
set -euo pipefail
STASH=${FA4_STASH:-/tmp/fa4_stash}
SITE=${FA4_SITE:-/tmp/fa4_site}
PY=${PYTHON:-python3}

case "${1:-}" in
  stash)
    mkdir -p "$STASH"
    cp "$2"/* "$STASH"/
    ls -l "$STASH" >&2
    ;;
  unpack)
    mkdir -p "$STASH" "$SITE"
    shift
    for dir in "$@"; do
      if [ -d "$dir" ]; then cp "$dir"/* "$STASH"/; fi
    done
    cd "$STASH"
    for first in *.whl.part0; do
      [ -e "$first" ] || continue
      whl=${first%.part0}
      # parts in numeric order: part0, part1, ..., part10
      cat $(ls "$whl".part* | awk -F'.part' '{print $NF, $0}' | sort -n | cut -d' ' -f2-) > "$whl"
    done
    sha256sum -c SHA256SUMS >&2 \
      || { echo "fa4_carry: a wheel does not match SHA256SUMS (a part missing?)" >&2; exit 1; }
    for whl in $(awk '{print $2}' SHA256SUMS); do
      "$PY" -m zipfile -e "$whl" "$SITE"
    done
    echo "fa4_carry: $(awk 'END {print NR}' SHA256SUMS) wheels unpacked into $SITE" >&2
    echo "export PYTHONPATH=$SITE:$SITE/nvidia_cutlass_dsl/dsl_packages\${PYTHONPATH:+:\$PYTHONPATH}"
    ;;
  *)
    echo "usage: $0 stash DIR | unpack DIR..." >&2
    exit 2
    ;;
esac
