#!/usr/bin/env bash
# On an H200 machine: run each real program once per mode (RESULT lines), then capture one with
# `nsync profile` to check that the optimizer-step marks reach the trace.
source "$(dirname "$0")/h200-env.sh"
cd "$ROOT/fixtures/real"
for p in ${PROGRAMS:-lstm_lm resnet_train timm_gradnorm hf_trainer compiled_train}; do
  for m in degraded healthy; do
    s=$SECONDS; python3 "$p.py" "$m" > "$OUT/$p.$m.log" 2>&1; rc=$?
    echo "$p $m rc=$rc $((SECONDS - s)) s: $(grep RESULT "$OUT/$p.$m.log")"; [ $rc = 0 ] || tail -5 "$OUT/$p.$m.log"
  done
done
