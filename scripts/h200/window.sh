#!/usr/bin/env bash
# On an H200 machine: `nsync profile` (default window: 10 warm-up steps, 40 captured, then the program is ended)
# of two training jobs written to run 20 000 steps, with the wall time of each stage; then the unprofiled speed of
# each job over a few hundred steps, to tell how long the whole run would have taken. Writes into $OUT.
source "$(dirname "$0")/env.sh"
cd "$ROOT/fixtures/real"
for job in "timm_gradnorm.py degraded 20000" "long_train.py 20000"; do
  name=$(basename "${job%% *}" .py)
  s=$SECONDS
  # shellcheck disable=SC2086  # the job's words are its argv
  LD_LIBRARY_PATH=$ROOT/.libdw python3 -m nsync profile --nsys "$NSYS" -o /tmp/win --name "${name}_window" \
    --json "/tmp/win/${name}.json" $job > "$OUT/${name}_window.log" 2>&1
  echo "== nsync profile $job: rc=$? in $((SECONDS - s)) s"
  grep -E "^nsync: |verdict|steps \(|error" "$OUT/${name}_window.log" | grep -v "^nsync: nsys: \[" | cut -c1-220
done
ls -la /tmp/win
s=$SECONDS; python3 timm_gradnorm.py degraded 300 2>&1 | grep RESULT; echo "== timm 300 steps unprofiled: $((SECONDS - s)) s"
s=$SECONDS; timeout 300 python3 long_train.py 1000 2>&1 | tail -2; echo "== long_train 1000 steps unprofiled: $((SECONDS - s)) s"
python3 "$ROOT/scripts/sanitize_trace.py" /tmp/win/timm_gradnorm_window.sqlite "$ROOT/fixtures/real" /home/user/proj --shrink \
  && xz -6 -T0 -c /tmp/win/timm_gradnorm_window.sqlite > "$OUT/timm_window.sqlite.xz"
cp /tmp/win/timm_gradnorm_window.calibration.json "$OUT/timm_window.calibration.json" 2>/dev/null
cp /tmp/win/*.json "$OUT/" 2>/dev/null
ls -la "$OUT"
