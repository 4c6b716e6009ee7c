#!/usr/bin/env bash
# On an H200 machine: `nsync measure` with one command (fixtures/h200/switched). Each SPEC NAME:MODE[:TAG]
# runs `nsync measure $SWITCHED_ARGS` of fixtures/fresh/NAME.py through scripts/h200/switched.py, the program's
# StepTimer asking nsync.fixed() (MODE switch: the fix in B's blocks; same: the program as it is in both), its
# JSON into $OUT/switched-NAME-MODE-TAG.json. No program starts after $NSYNC_DEADLINE (epoch seconds).
source "$(dirname "$0")/env.sh"
cd "$ROOT/fixtures/fresh"
for spec in "$@"; do
  s=$SECONDS
  if [ -n "${NSYNC_DEADLINE:-}" ] && [ "$(date +%s)" -gt "$NSYNC_DEADLINE" ]; then echo "== $spec not started (deadline)"; continue; fi
  IFS=: read -r name mode tag <<< "$spec"
  # shellcheck disable=SC2086  # (the extra options are words on purpose)
  python3 -m nsync measure ${SWITCHED_ARGS:-} --json "$OUT/switched-$name-$mode-$tag.json" \
    "$ROOT/scripts/h200/switched.py $name.py $mode 1000" > "/tmp/s-$name.log" 2> "/tmp/s-$name.err"
  echo "== $spec rc=$? $((SECONDS - s)) s"; cat "/tmp/s-$name.log"; grep -v "^nsync: run " "/tmp/s-$name.err" | grep "^nsync" | tail -3
done 2>&1 | tee -a "$OUT/switched.log"
