#!/usr/bin/env bash
# On an H200 machine: time w_print.py unprofiled, then run it under `nsync profile` and keep the analysis.
source "$(dirname "$0")/h200-env.sh"
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
