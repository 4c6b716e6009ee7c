#!/usr/bin/env bash
# On an H200 machine (docs: shared device-capture.md): time w_print.py unprofiled, then run it under
# `nsync profile` and keep the analysis. Needs .libdw/ (libdw.so.1, libelf.so.1 from Debian bookworm's
# libdw1/libelf1) because the nsys shipped inside Nsight Compute cannot import its capture without them.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-/tmp/nsync-h200}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$ROOT
NSYS=${NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}
cd "$ROOT/fixtures/h200"
echo "== unprofiled"
for mode in healthy degraded; do for i in 1 2; do python3 w_print.py "$mode" 2>&1 | grep RESULT; done; done
for mode in degraded healthy; do
  echo "== nsync profile w_print.py $mode"
  start=$(date +%s)
  LD_LIBRARY_PATH=$ROOT/.libdw python3 -m nsync profile --nsys "$NSYS" -o /tmp/prof --name "print_$mode" \
    --json "$OUT/print_$mode.json" w_print.py "$mode" 2>&1 | grep -v '^.\[1/1\]' | grep -v 'tensor(' | tail -30
  echo "wall $(( $(date +%s) - start )) s"
done
ls -la /tmp/prof
