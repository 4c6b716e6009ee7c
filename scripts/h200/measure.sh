#!/usr/bin/env bash
# On an H200 machine: `nsync measure`'s ground truth (fixtures/h200/measure). Each SPEC NAME:A:B runs
# `nsync measure --runs $RUNS` of fixtures/fresh/NAME.py in mode A against mode B (degraded:healthy is the fix,
# degraded:degraded the same code twice), its JSON into $OUT/measure-NAME-A-B.json; `ab:NAME` runs NAME once
# in ab mode (healthy and degraded blocks alternating in one process: the fix's saving as issue 26 measured
# it) into $OUT/ab-timings.log. $MEASURE_ARGS: more options (--cpus 2-5); $TAG: after the JSON's name. No program starts after $NSYNC_DEADLINE (epoch seconds).
source "$(dirname "$0")/env.sh"
cd "$ROOT/fixtures/fresh"
for spec in "$@"; do
  s=$SECONDS
  if [ -n "${NSYNC_DEADLINE:-}" ] && [ "$(date +%s)" -gt "$NSYNC_DEADLINE" ]; then echo "== $spec not started (deadline)"; continue; fi
  IFS=: read -r name a b <<< "$spec"
  if [ "$name" = ab ]; then
    python3 "$a.py" ab $((10 + 28 * ${NSYNC_AB_BLOCKS:-3})) > "/tmp/ab-$a.log" 2>&1
    echo "== $spec rc=$? $((SECONDS - s)) s"; grep RESULT "/tmp/ab-$a.log" | tee -a "$OUT/ab-timings.log"
    continue
  fi
  # shellcheck disable=SC2086  # (the extra options are words on purpose)
  python3 -m nsync measure --runs "${RUNS:-8}" ${MEASURE_ARGS:-} --json "$OUT/measure-$name-$a-$b${TAG:-}.json" "$name.py $a 300" \
    "$name.py $b 300" > "/tmp/m-$name.log" 2> "/tmp/m-$name.err"
  echo "== $spec rc=$? $((SECONDS - s)) s"; cat "/tmp/m-$name.log"; grep -v "^nsync: run " "/tmp/m-$name.err" | tail -5
done 2>&1 | tee -a "$OUT/measure.log"
