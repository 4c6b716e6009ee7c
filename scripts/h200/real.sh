#!/usr/bin/env bash
# On an H200 machine: capture each real program (fixtures/real) with `nsync profile` (default flags, step
# marks on), count the marks, sanitize (--shrink) and compress the exports into $OUT. Arguments:
# NAME:STEPS[:MODE] (the program's argv[2], kept short so that a fixture stays under 5 MB; MODE: degraded).
source "$(dirname "$0")/env.sh"
cd "$ROOT/fixtures/real"
for spec in "$@"; do
  real_spec "$spec"
  s=$SECONDS
  LD_LIBRARY_PATH=$ROOT/.libdw python3 -m nsync profile --nsys "$NSYS" -o /tmp/prof --name "$out" --no-keep-report \
    --json "/tmp/prof/$out.json" "$name.py" "$mode" "$steps" > "/tmp/prof-$out.log" 2>&1
  echo "== $out rc=$? $((SECONDS - s)) s"; grep -vE "^\| |^\{" "/tmp/prof-$out.log" | tail -22
  python3 - "/tmp/prof/$out.sqlite" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
marks = db.execute("SELECT count(*) FROM NVTX_EVENTS e LEFT JOIN StringIds s ON e.textId = s.id "
                   "WHERE coalesce(e.text, s.value) = 'nsync: optimizer step'").fetchone()[0]
print("optimizer-step marks:", marks)
PY
  python3 "$ROOT/scripts/sanitize_trace.py" "/tmp/prof/$out.sqlite" "$ROOT/fixtures/real" /home/user/proj --shrink
  xz -6 -T0 -c "/tmp/prof/$out.sqlite" > "$OUT/$out.sqlite.xz"
done 2>&1 | tee "$OUT/captures.log"
ls -la "$OUT"
