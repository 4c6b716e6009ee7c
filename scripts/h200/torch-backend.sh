#!/usr/bin/env bash
# On a lent GPU machine: each program captured with `nsync profile --backend torch` (calibration run on,
# default window; lab scenarios whole, as they have no optimizer), and, with WITH_NSYS=1, with nsys too (the
# same command); with AB=1 (the default) each program's modes timed unprofiled in one process first (harness 'ab';
# a real program's in $NSYNC_AB_BLOCKS pairs of blocks, 20 unless given).
# Arguments: lab scenarios as h200/NAME:MODE, real programs as real/NAME:MODE:STEPS. Everything ends in
# $OUT/torch-backend.tar (calibrations, JSON results, logs), written also when the time is up: the captures get
# ${TORCH_BACKEND_S:-900} s in all (200 s each at most); one not started for want of time says so. Traces are
# kept beside it as NAME.pt.trace.json.xz unless KEEP_TRACES=0 (what comes back: 8 files of 16 MiB at most).
# CALIBRATION_RUNS=N pools N calibration runs; TAR=NAME names the tar (several in one call).
source "$(dirname "$0")/env.sh"
cd "$ROOT/fixtures"
run() {  # DIR OUTNAME BACKEND ARGS...
  local dir=$1 out=$2 backend=$3; shift 3
  local s=$SECONDS extra=() nsys=() left=$((${TORCH_BACKEND_S:-900} - SECONDS))
  if [ "$left" -lt 30 ]; then echo "== $out ($backend) not started: $left s left"; return; fi
  [ "$dir" = h200 ] && extra=(--whole-run)
  [ "$backend" = nsys ] && nsys=(--nsys "$NSYS" --no-keep-report)
  [ -n "${CALIBRATION_RUNS:-}" ] && extra+=(--calibration-runs "$CALIBRATION_RUNS")
  (cd "$dir" && LD_LIBRARY_PATH=$ROOT/.libdw timeout $((left < 200 ? left : 200)) \
    python3 -m nsync profile --backend "$backend" "${nsys[@]}" "${extra[@]}" \
    -o "$OUT/t" --name "$out" --json "$OUT/t/$out.json" "$@" > "$OUT/t/$out.log" 2>&1)
  echo "== $out ($backend) rc=$? $((SECONDS - s)) s"
  grep -E "^verdict|^#1 |calibrat|error|Traceback|median" "$OUT/t/$out.log" | grep -v "^nsync: calibration run:" | head -8
}
mkdir -p "$OUT/t"
for spec in "$@"; do
  IFS=: read -r path mode steps <<< "$spec"
  dir=${path%%/*} name=${path#*/}
  if [ "${AB:-1}" = 1 ]; then
    if [ "$dir" = h200 ]; then ab=(healthy,degraded); else ab=($((10 + 28 * ${NSYNC_AB_BLOCKS:-20}))); fi
    (cd "$dir" && NSYNC_AB_BLOCKS=${NSYNC_AB_BLOCKS:-20} python3 "$name.py" ab "${ab[@]}" 2>&1 | grep RESULT | tee -a "$OUT/t/ab.log")
  fi
  run "$dir" "${name}_$mode" torch "$name.py" "$mode" $steps
  [ "${WITH_NSYS:-0}" = 1 ] && run "$dir" "${name}_${mode}_nsys" nsys "$name.py" "$mode" $steps
done 2>&1 | tee "$OUT/t/summary.log"
rm -f "$OUT"/t/*.sqlite
for trace in "$OUT"/t/*.pt.trace.json.gz; do
  [ -f "$trace" ] || continue
  [ "${KEEP_TRACES:-1}" = 1 ] && zcat "$trace" | xz -T0 -6 > "$OUT/$(basename "$trace" .gz).xz"
  rm -f "$trace"
done
(cd "$OUT" && tar cf "${TAR:-torch-backend}.tar" t && rm -rf t && ls -la)
