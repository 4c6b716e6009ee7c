#!/usr/bin/env bash
# On an H200 machine: time w_hidden.py (or WORKLOAD) in both modes, alternating, unprofiled and under nsys with
# three sets of flags, REPS times each, all on CPUs 2-5, into $OUT/flags.log. It asks which of nsync profile's
# flags slow a program's launches, and whether they slow a program that syncs each step more than one that
# does not.
source "$(dirname "$0")/env.sh"
w=${WORKLOAD:-w_hidden}
base=(-t cuda,nvtx,osrt --cpuctxsw=none -o /tmp/flags --force-overwrite=true)
declare -A flags=(
  [full]="--sample=process-tree --backtrace=fp --cudabacktrace=sync,memory --python-backtrace=cuda"
  [sampling]="--sample=process-tree --backtrace=fp"
  [trace]="--sample=none"
)
for i in $(seq "${REPS:-2}"); do
  for mode in healthy degraded; do
    taskset -c 2-5 python3 "$w.py" "$mode" 2>&1 | grep RESULT | sed "s/^/unprofiled /"
    for f in full sampling trace; do
      # shellcheck disable=SC2086  # the flags are words
      LD_LIBRARY_PATH=$ROOT/.libdw taskset -c 2-5 "$NSYS" profile "${base[@]}" ${flags[$f]} python3 "$w.py" "$mode" \
        2>&1 | grep RESULT | sed "s/^/$f /"
    done
  done
done 2>&1 | tee -a "$OUT/flags.log"
