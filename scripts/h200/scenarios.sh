#!/usr/bin/env bash
# On an H200 machine: time each scenario unprofiled (2 runs per mode), capture each mode with
# `nsync profile`, sanitize the exports and compress them into $OUT.
source "$(dirname "$0")/env.sh"
for w in "$@"; do
  for mode in healthy degraded; do for i in 1 2; do python3 "$w.py" "$mode" 2>&1 | grep RESULT; done; done
  for mode in healthy degraded; do
    LD_LIBRARY_PATH=$ROOT/.libdw python3 -m nsync profile --nsys "$NSYS" -o /tmp/prof --name "${w}_$mode" \
      --no-keep-report "$w.py" "$mode" 2>&1 | grep -E 'RESULT|^│ 1|what if|error'
    python3 "$ROOT/scripts/sanitize_trace.py" "/tmp/prof/${w}_$mode.sqlite" "$ROOT/fixtures/h200"
    xz -6 -T0 -c "/tmp/prof/${w}_$mode.sqlite" > "$OUT/${w}_$mode.sqlite.xz"
  done
done
ls -la "$OUT"
