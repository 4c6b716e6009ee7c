#!/usr/bin/env bash
# On an H200 machine, for each lab scenario NAME[:MODE,MODE...] (default modes: healthy,degraded):
#   1. (AB=1) time the modes unprofiled in one process (harness.py 'ab': NSYNC_AB_ROUNDS rounds of one block
#      per mode), into $OUT/timings.log;
#   2. (RUNS=N) time each mode in N separate processes, modes alternating, into $OUT/timings.log;
#   3. (CAPTURE=1) capture healthy and degraded with `nsync profile` (calibration run on, default flags),
#      sanitize the exports (--shrink), compress them, and keep each one's NAME_MODE.calibration.json.
# Everything written to $OUT ends in $OUT/calibrated.tar (the device returns at most 8 files).
source "$(dirname "$0")/env.sh"
for spec in "$@"; do
  w=${spec%%:*} modes=healthy,degraded
  [ "$spec" = "$w" ] || modes=${spec#*:}
  [ "${AB:-1}" = 1 ] && python3 "$w.py" ab "$modes" 2>&1 | grep -E "RESULT|Error" | tee -a "$OUT/timings.log"
  for i in $(seq "${RUNS:-0}"); do
    for mode in ${modes//,/ }; do python3 "$w.py" "$mode" 2>&1 | grep -E "RESULT|Error" | tee -a "$OUT/timings.log"; done
  done
done
for spec in "$@"; do
  [ "${CAPTURE:-1}" = 1 ] || break
  w=${spec%%:*}
  for mode in healthy degraded; do
    s=$SECONDS
    LD_LIBRARY_PATH=$ROOT/.libdw python3 -m nsync profile --nsys "$NSYS" -o /tmp/prof --name "${w}_$mode" \
      --no-keep-report --json "/tmp/prof/${w}_$mode.json" "$w.py" "$mode" > "/tmp/prof-${w}_$mode.log" 2>&1
    echo "== ${w}_$mode rc=$? $((SECONDS - s)) s"; grep -E "RESULT|calibration:|error|Traceback" "/tmp/prof-${w}_$mode.log"
    python3 "$ROOT/scripts/sanitize_trace.py" "/tmp/prof/${w}_$mode.sqlite" "$ROOT/fixtures/h200" /home/user/proj --shrink
    xz -6 -T0 -c "/tmp/prof/${w}_$mode.sqlite" > "$OUT/${w}_$mode.sqlite.xz"
    cp "/tmp/prof/${w}_$mode.calibration.json" "$OUT/" 2>/dev/null
    (cd "$OUT" && tar rf calibrated.tar "${w}_$mode".* && rm -f "${w}_$mode".*)  # kept if a later one times out
  done
done 2>&1 | tee -a "$OUT/captures.log"
cd "$OUT" && tar rf calibrated.tar ./*.log && rm -f ./*.log && tar tvf calibrated.tar
