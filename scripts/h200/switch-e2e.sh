#!/usr/bin/env bash
# On an H200 machine (written 2026-12-03 and not yet run there: that session's device time ran out): the
# loop end to end (fixtures/h200/switched/e2e-*): for each fresh program NAME, the
# switched patch nsync writes from its capture (nsync analyze fixtures/fresh/NAME.sqlite.xz --suggest-switch),
# applied to a copy of the program, then `nsync measure "NAME.py degraded 1000"` (five runs, defaults), its
# JSON into $OUT/e2e-NAME.json. No measure starts after $NSYNC_DEADLINE (epoch seconds).
source "$(dirname "$0")/env.sh"
work=/tmp/nsync-e2e
rm -rf "$work" && mkdir -p "$work" && cp "$ROOT/fixtures/fresh/steptimer.py" "$work"
for name in "$@"; do
  if [ -n "${NSYNC_DEADLINE:-}" ] && [ "$(date +%s)" -gt "$NSYNC_DEADLINE" ]; then echo "== $name not started (deadline)"; continue; fi
  s=$SECONDS
  cp "$ROOT/fixtures/fresh/$name.py" "$work"
  (cd "$work" && python3 -m nsync analyze "$ROOT/fixtures/fresh/$name.sqlite.xz" --suggest-switch "$name.patch" -q \
    && { patch -p1 -s -i "$name.patch" || git apply "$name.patch"; }
  ) || { echo "== $name: no patch"; continue; }
  cp "$work/$name.patch" "$OUT/e2e-$name.patch"
  (cd "$work" && python3 -m nsync measure --json "$OUT/e2e-$name.json" "$name.py degraded 1000" > "/tmp/e2e-$name.log" 2> "/tmp/e2e-$name.err")
  echo "== $name rc=$? $((SECONDS - s)) s"; cat "/tmp/e2e-$name.log"; grep "^nsync" "/tmp/e2e-$name.err" | tail -7
done 2>&1 | tee -a "$OUT/e2e.log"
