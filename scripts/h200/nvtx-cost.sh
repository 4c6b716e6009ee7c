#!/usr/bin/env bash
# On an H200 machine: does tracing NVTX (`-t nvtx`) slow a real program's host, and does nsys record Python
# backtraces without it? Each of $PROGRAMS (fixtures/fresh, `ab` mode: healthy and degraded blocks alternating,
# $NSYNC_AB_BLOCKS pairs) runs unprofiled (none), under all of nsync's flags (full) and under all of them but
# `nvtx` in -t (nonvtx), $1 rounds alternated, until $NSYNC_DEADLINE (epoch s). The first nonvtx capture of
# each program is exported and its Python backtraces counted (scripts/h200/count-frames.py). RESULT lines into
# $OUT/nvtx-cost.log (fixtures/h200/profiler-cost).
source "$(dirname "$0")/env.sh"
cd "$ROOT/fixtures/fresh"
export NSYNC_AB_BLOCKS=${NSYNC_AB_BLOCKS:-3}
steps=$((10 + 28 * NSYNC_AB_BLOCKS))
common="--cpuctxsw=none --sample=process-tree --backtrace=fp --cudabacktrace=sync,memory --python-backtrace=cuda"
declare -A FLAGS=([full]="-t cuda,nvtx,osrt $common" [nonvtx]="-t cuda,osrt $common")
IMPORTER=$(dirname "$NSYS")/../linux-desktop-glibc_2_11_3-x64/QdstrmImporter
declare -A counted=()
for round in $(seq "${1:-2}"); do
  for program in ${PROGRAMS:-hf_gpt2_perseq}; do
    for config in ${CONFIGS:-nonvtx none full}; do
      if [ -n "${NSYNC_DEADLINE:-}" ] && [ "$(date +%s)" -gt "$NSYNC_DEADLINE" ]; then continue; fi
      rm -f /tmp/nv.nsys-rep /tmp/nv.qdstrm "/tmp/$program-nonvtx.sqlite"  # (a machine kept warm keeps /tmp)
      start=$(date +%s)
      if [ "$config" = none ]; then
        python3 "$program.py" ab "$steps" > /tmp/nv.log 2>&1
      else
        # shellcheck disable=SC2086  # (the flags are words on purpose)
        "$NSYS" profile ${FLAGS[$config]} -o /tmp/nv --force-overwrite=true python3 "$program.py" ab "$steps" > /tmp/nv.log 2>&1
      fi
      echo "$round $config $(grep RESULT /tmp/nv.log) seconds=$(( $(date +%s) - start ))" | tee -a "$OUT/nvtx-cost.log"
      grep -iE "warn|error|python" /tmp/nv.log | grep -v RESULT | head -5 | sed "s/^/  $config: /" | tee -a "$OUT/nvtx-cost.log"
      if [ "$config" = nonvtx ] && [ -z "${counted[$program]:-}" ]; then
        counted[$program]=1
        [ -f /tmp/nv.nsys-rep ] || LD_LIBRARY_PATH=$ROOT/.libdw "$IMPORTER" -i /tmp/nv.qdstrm > /dev/null 2>&1
        "$NSYS" export --type sqlite --include-blobs=true -o "/tmp/$program-nonvtx.sqlite" --force-overwrite=true /tmp/nv.nsys-rep > /dev/null 2>&1
        python3 "$ROOT/scripts/h200/count-frames.py" "/tmp/$program-nonvtx.sqlite" | sed "s/^/  frames $program: /" | tee -a "$OUT/nvtx-cost.log"
        xz -6 -T0 -c "/tmp/$program-nonvtx.sqlite" > "$OUT/$program-nonvtx.sqlite.xz"
      fi
    done
  done
done
