#!/usr/bin/env bash
# Issue 43 on a lent GPU: harvest a held-out set (held-out-5 to held-out-8: their programs are in
# scripts/h200/held_out_5.py to held_out_8.py), then write nsync's rewrites of its lines into the libraries and run
# its programs again (scripts/h200/check-rewrites.py), with those of the sets named after it too (their rewrites as
# nsync writes them now). Usage: scripts/h200/held-out.sh SET [SET...]. nsync's own
# dependencies that the image lacks travel as wheels in .whl/ (pip download msgspec sqlite-utils adbc-driver-sqlite
# for cp312).
set -u
set_name=${1:?which set: held-out-5 ... held-out-8}
python3 -m pip install -q --no-deps .whl/msgspec-* .whl/sqlite_utils-* .whl/sqlite_fts4-* .whl/click_default_group-* \
  .whl/adbc_driver_* 2>&1 | grep -v WARNING | tail -2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, nsync.testing; print('torch', torch.__version__)" || exit 1
timeout 200 python3 scripts/h200/harvest-syncs.py "$set_name" > "$OUT/harvest.log" 2>&1
grep -v "^ \|^Traceback" "$OUT/harvest.log" | tail -20
timeout 340 python3 scripts/h200/check-rewrites.py "$@" > "$OUT/rewrites.log" 2>&1
tail -40 "$OUT/rewrites.log"
