#!/usr/bin/env bash
# On an H200 machine: issue 26's fresh ground truth (fixtures/fresh). `ab NAME...`: time each program
# unprofiled in ab mode (healthy and degraded blocks alternating in one process, steptimer.py; $NSYNC_AB_BLOCKS
# pairs). `capture NAME:STEPS[:MODE]...`: capture with `nsync profile` (default flags, as a user runs it),
# sanitize (--shrink) and compress into $OUT, with the analysis's JSON and the calibration file.
# $NSYNC_DEADLINE (epoch seconds): start no program after it, so that a device call ends within its limit.
# $NSYNC_PROFILE_ARGS: more options for `nsync profile` (e.g. "--calibration-runs 3").
source "$(dirname "$0")/env.sh"
FRESH_DIR=${FRESH_DIR:-fixtures/fresh}  # the session folder holding the programs
cd "$ROOT/$FRESH_DIR"
what=$1; shift
for spec in "$@"; do
  s=$SECONDS
  if [ -n "${NSYNC_DEADLINE:-}" ] && [ "$(date +%s)" -gt "$NSYNC_DEADLINE" ]; then echo "== $spec not started (deadline)"; continue; fi
  if [ "$what" = ab ]; then
    python3 "$spec.py" ab $((10 + 28 * ${NSYNC_AB_BLOCKS:-5})) > "/tmp/ab-$spec.log" 2>&1
    echo "== $spec ab rc=$? $((SECONDS - s)) s"; grep -E "RESULT|Error|error" "/tmp/ab-$spec.log" | tail -4
    grep RESULT "/tmp/ab-$spec.log" >> "$OUT/ab-timings.log"
    continue
  fi
  real_spec "$spec"
  # shellcheck disable=SC2086  # (the extra options are words on purpose)
  LD_LIBRARY_PATH=$ROOT/.libdw python3 -m nsync profile --nsys "$NSYS" -o /tmp/prof --name "$out" --no-keep-report \
    ${NSYNC_PROFILE_ARGS:-} --json "$OUT/$out.json" "$name.py" "$mode" "$steps" > "/tmp/prof-$out.log" 2>&1
  echo "== $out rc=$? $((SECONDS - s)) s"; grep -vE "^\| |^\{" "/tmp/prof-$out.log" | tail -14
  cp "/tmp/prof/$out.calibration.json" "$OUT/" 2>/dev/null
  python3 "$ROOT/scripts/sanitize_trace.py" "/tmp/prof/$out.sqlite" "$ROOT/$FRESH_DIR" /home/user/proj --shrink
  xz -6 -T0 -c "/tmp/prof/$out.sqlite" > "$OUT/$out.sqlite.xz"
done 2>&1 | tee -a "$OUT/$what.log"
