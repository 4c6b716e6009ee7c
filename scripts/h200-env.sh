# Sourced by the scripts/h200-*.sh: paths and environment on an H200 machine (docs/device-capture.md).
# .libdw/ must hold libdw.so.1 and libelf.so.1 (Debian bookworm's libdw1, libelf1): the nsys shipped inside
# Nsight Compute cannot import its capture without them.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-/tmp/nsync-h200}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$ROOT
NSYS=${NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}
cd "$ROOT/fixtures/h200"
