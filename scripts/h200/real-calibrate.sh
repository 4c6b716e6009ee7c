#!/usr/bin/env bash
# On an H200 machine: the calibration run of each real program (fixtures/real), as `nsync profile` makes it
# (the program once without the profiler, steps timed with CUDA events), for traces captured before
# calibration existed. Arguments: NAME:STEPS[:MODE] as for scripts/h200/real.sh. Writes
# $OUT/NAME[_MODE].calibration.json (MODE other than degraded in the name).
source "$(dirname "$0")/env.sh"
cd "$ROOT/fixtures/real"
for spec in "$@"; do
  real_spec "$spec"
  s=$SECONDS
  python3 - "$OUT/$out.calibration.json" "$name.py" "$mode" "$steps" > "/tmp/cal-$out.log" 2>&1 <<'PY'
import sys
from pathlib import Path
from nsync.load.calibration import run_calibration, write_calibration
run = run_calibration(["python3", *sys.argv[2:]], Path(sys.argv[1]), lambda note: print("nsync:", note))
if run is not None and run.calibration is not None:
    write_calibration(run.calibration, Path(sys.argv[1]))
PY
  echo "== $out rc=$? $((SECONDS - s)) s"; grep -E "nsync:|RESULT|Error" "/tmp/cal-$out.log" | tail -5
done 2>&1 | tee -a "$OUT/calibrate.log"
