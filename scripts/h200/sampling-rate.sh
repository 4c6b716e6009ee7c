#!/usr/bin/env bash
# On an H200 machine: does CPU sampling's rate set the host slow-down of nsync profile's flags? $PROGRAM
# (fixtures/fresh, default hf_gpt2_perseq) in `ab` mode under nsync's flags with sampling every $RATES
# CPU-clock events (ns; default 16000000, the longest nsys takes),
# $1 rounds; RESULT lines into $OUT/sampling-rate.log (fixtures/h200/profiler-cost).
source "$(dirname "$0")/env.sh"
cd "$ROOT/fixtures/fresh"
export NSYNC_AB_BLOCKS=${NSYNC_AB_BLOCKS:-3}
program=${PROGRAM:-hf_gpt2_perseq}
steps=$((10 + 28 * NSYNC_AB_BLOCKS))
"$NSYS" profile --help 2>&1 | grep -A8 -E "sampling-period=" | tee -a "$OUT/sampling-rate.log"
for round in $(seq "${1:-2}"); do
  for rate in ${RATES:-16000000}; do
    "$NSYS" profile -t cuda,nvtx,osrt --cpuctxsw=none --sample=process-tree --backtrace=fp "--sampling-period=$rate" \
      --cudabacktrace=sync,memory --python-backtrace=cuda -o /tmp/rate --force-overwrite=true \
      python3 "$program.py" ab "$steps" > /tmp/rate.log 2>&1
    echo "$round $rate $(grep -E "RESULT|rror" /tmp/rate.log | head -3)" | tee -a "$OUT/sampling-rate.log"
  done
done
