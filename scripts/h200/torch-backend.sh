#!/usr/bin/env bash
# On a lent GPU machine: each program captured with `nsync profile --backend torch` (calibration run on,
# default window; lab scenarios whole, as they have no optimizer), and, with WITH_NSYS=1, with nsys too (the
# same command); with AB=1 each lab scenario's modes timed unprofiled in one process first (harness 'ab').
# Arguments: lab scenarios as h200/NAME:MODE, real programs as real/NAME:MODE:STEPS. Everything ends in
# $OUT/torch-backend.tar (traces unless KEEP_TRACES=0, calibrations, JSON results, logs).
source "$(dirname "$0")/env.sh"
cd "$ROOT/fixtures"
run() {  # DIR OUTNAME BACKEND ARGS...
  local dir=$1 out=$2 backend=$3; shift 3
  local s=$SECONDS extra=() nsys=()
  [ "$dir" = h200 ] && extra=(--whole-run)
  [ "$backend" = nsys ] && nsys=(--nsys "$NSYS" --no-keep-report)
  (cd "$dir" && LD_LIBRARY_PATH=$ROOT/.libdw timeout 200 python3 -m nsync profile --backend "$backend" "${nsys[@]}" \
    "${extra[@]}" -o "$OUT/t" --name "$out" --json "$OUT/t/$out.json" "$@" > "$OUT/t/$out.log" 2>&1)
  echo "== $out ($backend) rc=$? $((SECONDS - s)) s"
  grep -E "^verdict|^#1 |calibrat|error|Traceback|median" "$OUT/t/$out.log" | grep -v "^nsync: calibration run:" | head -8
}
mkdir -p "$OUT/t"
for spec in "$@"; do
  IFS=: read -r path mode steps <<< "$spec"
  dir=${path%%/*} name=${path#*/}
  [ "$dir" = h200 ] && [ "${AB:-1}" = 1 ] && (cd h200 && python3 "$name.py" ab healthy,degraded 2>&1 | grep RESULT | tee -a "$OUT/t/ab.log")
  run "$dir" "${name}_$mode" torch "$name.py" "$mode" $steps
  [ "${WITH_NSYS:-0}" = 1 ] && run "$dir" "${name}_${mode}_nsys" nsys "$name.py" "$mode" $steps
done 2>&1 | tee "$OUT/t/summary.log"
rm -f "$OUT"/t/*.sqlite
[ "${KEEP_TRACES:-1}" = 1 ] || rm -f "$OUT"/t/*.pt.trace.json.gz  # (what comes back: 16 MiB a file)
(cd "$OUT" && tar cf torch-backend.tar t && rm -rf t && ls -la)
