#!/usr/bin/env bash
# On an H200 machine: scripts/h200/dispatch-gap.py unprofiled and under nsys with nsync profile's flags,
# alternated $1 times (default 2); RESULT lines into $OUT/dispatch-gap.log, the last capture exported to SQLite
# and compressed into $OUT/dispatch-gap.sqlite.xz (its kernel rows: what the replay would see).
source "$(dirname "$0")/env.sh"
cd "$ROOT"
flags=(-t cuda,nvtx,osrt --cpuctxsw=none --sample=process-tree --backtrace=fp --cudabacktrace=sync,memory
       --python-backtrace=cuda)  # nsync/capturing/nsys/capture.py: profile_flags
for round in $(seq "${1:-2}"); do
  echo "== unprofiled $round" | tee -a "$OUT/dispatch-gap.log"
  python3 scripts/h200/dispatch-gap.py 2>&1 | grep RESULT | tee -a "$OUT/dispatch-gap.log"
  echo "== profiled $round" | tee -a "$OUT/dispatch-gap.log"
  LD_LIBRARY_PATH=$ROOT/.libdw "$NSYS" profile "${flags[@]}" -o /tmp/gap --force-overwrite=true \
    python3 scripts/h200/dispatch-gap.py > /tmp/gap.log 2>&1
  grep RESULT /tmp/gap.log | tee -a "$OUT/dispatch-gap.log"
done
LD_LIBRARY_PATH=$ROOT/.libdw "$NSYS" export --type sqlite --force-overwrite=true -o /tmp/gap.sqlite /tmp/gap.nsys-rep > /dev/null 2>&1
xz -6 -T0 -c /tmp/gap.sqlite > "$OUT/dispatch-gap.sqlite.xz"
