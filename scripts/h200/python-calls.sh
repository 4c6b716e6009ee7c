#!/usr/bin/env bash
# On an H200 machine: which of nsync profile's nsys flags slows plain Python, a loop in C against calls of a
# Python function (scripts/h200/call-overhead.py run calls): unprofiled, under all of nsync's flags, all but the
# Python backtraces, all but the CPU sampling; alternated $1 times (default 3); RESULT lines into
# $OUT/python-calls.log (fixtures/h200/profiler-cost).
source "$(dirname "$0")/env.sh"
cd "$ROOT"
full=(-t cuda,nvtx,osrt --cpuctxsw=none --sample=process-tree --backtrace=fp --cudabacktrace=sync,memory
      --python-backtrace=cuda)  # nsync/capturing/nsys/capture.py: profile_flags
no_python=(-t cuda,nvtx,osrt --cpuctxsw=none --sample=process-tree --backtrace=fp --cudabacktrace=sync,memory)
no_sampling=(-t cuda,nvtx,osrt --cpuctxsw=none --sample=none --cudabacktrace=sync,memory --python-backtrace=cuda)
for round in $(seq "${1:-3}"); do
  echo "== unprofiled $round" | tee -a "$OUT/python-calls.log"
  python3 scripts/h200/call-overhead.py run calls 2>&1 | grep RESULT | tee -a "$OUT/python-calls.log"
  for config in full no_python no_sampling; do
    declare -n flags=$config
    echo "== $config $round" | tee -a "$OUT/python-calls.log"
    "$NSYS" profile "${flags[@]}" -o /tmp/calls --force-overwrite=true \
      python3 scripts/h200/call-overhead.py run calls > /tmp/calls.log 2>&1
    grep RESULT /tmp/calls.log | tee -a "$OUT/python-calls.log"
  done
done
