# Sourced by the scripts/h200-*.sh: paths and environment on an H200 machine (docs/device-capture.md).
# .libdw/ must hold libdw.so.1 and libelf.so.1 (Debian bookworm's libdw1, libelf1): the nsys shipped inside
# Nsight Compute cannot import its capture without them.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${OUT:-/tmp/nsync-h200}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
NSYS=${NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}
cd "$ROOT/fixtures/h200"

# A real program's spec NAME:STEPS[:MODE] (scripts/h200-real*.sh) -> $name $steps $mode (default degraded)
# and $out, the outputs' base name (NAME, or NAME_MODE for a mode other than degraded).
real_spec() {
  IFS=: read -r name steps mode <<< "$1"
  mode=${mode:-degraded} out=$name
  [ "$mode" = degraded ] || out=${name}_$mode
}
