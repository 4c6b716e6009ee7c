#!/usr/bin/env bash
# On an H200 machine: for each shape OPS,MATMULS,PREP_ITERS of w_hidden.py, time both modes unprofiled (2 runs
# each) and under nsys with nsync profile's flags (1 run each, no export), all on CPUs 2-5, into $OUT/probe.log.
source "$(dirname "$0")/env.sh"
for shape in "$@"; do
  for mode in healthy degraded; do
    for i in 1 2; do NSYNC_HIDDEN=$shape taskset -c 2-5 python3 w_hidden.py "$mode" 2>&1 | grep RESULT | sed "s/^/$shape unprofiled /"; done
    s=$SECONDS
    NSYNC_HIDDEN=$shape LD_LIBRARY_PATH=$ROOT/.libdw taskset -c 2-5 "$NSYS" profile -t cuda,nvtx,osrt --cpuctxsw=none \
      --sample=process-tree --backtrace=fp --cudabacktrace=sync,memory --python-backtrace=cuda -o /tmp/probe \
      --force-overwrite=true python3 w_hidden.py "$mode" 2>&1 | grep RESULT | sed "s/^/$shape profiled /"
    echo "($((SECONDS - s)) s)"
  done
done 2>&1 | tee -a "$OUT/probe.log"
