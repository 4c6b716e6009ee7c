#!/usr/bin/env bash
# On an H200 machine: what each part of nsync profile's nsys flags costs a real program. Each program of
# fixtures/fresh runs in `ab` mode (steptimer.py: healthy and degraded blocks alternating, $NSYNC_AB_BLOCKS
# pairs) unprofiled and under nsys with: all of nsync's flags, all but OS-runtime tracing, all but the
# backtraces, and CUDA tracing alone (or $CONFIGS: also cuda-nvtx, cuda-backtraces); $1 rounds (default 2),
# alternated. RESULT lines into $OUT/flag-cost.log (fixtures/h200/profiler-cost).
source "$(dirname "$0")/env.sh"
cd "$ROOT/fixtures/fresh"
export NSYNC_AB_BLOCKS=${NSYNC_AB_BLOCKS:-3}
steps=$((10 + 28 * NSYNC_AB_BLOCKS))
declare -A FLAGS=(
  [full]="-t cuda,nvtx,osrt --cpuctxsw=none --sample=process-tree --backtrace=fp --cudabacktrace=sync,memory --python-backtrace=cuda"
  [no-osrt]="-t cuda,nvtx --cpuctxsw=none --sample=process-tree --backtrace=fp --cudabacktrace=sync,memory --python-backtrace=cuda"
  [no-backtraces]="-t cuda,nvtx,osrt --cpuctxsw=none --sample=process-tree --backtrace=fp"
  [cuda-only]="-t cuda --cpuctxsw=none --sample=none"
  [cuda-nvtx]="-t cuda,nvtx --cpuctxsw=none --sample=none"
  [cuda-backtraces]="-t cuda --cpuctxsw=none --sample=process-tree --backtrace=fp --cudabacktrace=sync,memory --python-backtrace=cuda"
)
programs=${PROGRAMS:-hf_gpt2_perseq hf_tok_tqdm}
for round in $(seq "${1:-2}"); do
  for program in $programs; do
    for config in ${CONFIGS:-none full no-osrt no-backtraces cuda-only}; do
      if [ -n "${NSYNC_DEADLINE:-}" ] && [ "$(date +%s)" -gt "$NSYNC_DEADLINE" ]; then continue; fi
      if [ "$config" = none ]; then
        python3 "$program.py" ab "$steps" > /tmp/flag.log 2>&1
      else
        # shellcheck disable=SC2086  # (the flags are words on purpose)
        "$NSYS" profile ${FLAGS[$config]} -o /tmp/flag --force-overwrite=true python3 "$program.py" ab "$steps" > /tmp/flag.log 2>&1
      fi
      echo "$round $config $(grep RESULT /tmp/flag.log)" | tee -a "$OUT/flag-cost.log"
    done
  done
done
