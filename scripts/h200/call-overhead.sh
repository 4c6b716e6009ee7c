#!/usr/bin/env bash
# On an H200 machine: scripts/h200/call-overhead.py unprofiled and under nsys with nsync profile's flags,
# alternated $1 times (default 3); RESULT lines into $OUT/call-overhead.log (fixtures/h200/profiler-cost).
source "$(dirname "$0")/env.sh"
cd "$ROOT"
for round in $(seq "${1:-3}"); do
  echo "== unprofiled $round" | tee -a "$OUT/call-overhead.log"
  python3 scripts/h200/call-overhead.py run 2>&1 | grep RESULT | tee -a "$OUT/call-overhead.log"
  echo "== profiled $round" | tee -a "$OUT/call-overhead.log"
  # nsync profile's flags (nsync/capturing/nsys/capture.py: profile_flags) for an nsys that records Python backtraces
  "$NSYS" profile -t cuda,nvtx,osrt --cpuctxsw=none --sample=process-tree --backtrace=fp \
    --cudabacktrace=sync,memory --python-backtrace=cuda -o /tmp/overhead --force-overwrite=true \
    python3 scripts/h200/call-overhead.py run > /tmp/overhead.log 2>&1
  grep RESULT /tmp/overhead.log | tee -a "$OUT/call-overhead.log"
done
