#!/usr/bin/env bash
# On an H200 machine: time each real program unprofiled in `ab` mode (healthy and degraded blocks
# alternating in one process: steptimer.py). Arguments: NAME:STEPS pairs (argv[2] of the program).
source "$(dirname "$0")/env.sh"
cd "$ROOT/fixtures/real"
for spec in "$@"; do
  name=${spec%%:*} steps=${spec#*:}
  python3 "$name.py" ab "$steps" 2>&1 | grep -E "RESULT|Error" | tee -a "$OUT/ab.log"
done
