#!/usr/bin/env bash
# On an H200 machine: capture each real program (fixtures/real) with `nsync profile` (default flags, step
# marks on), count the marks, sanitize (--shrink) and compress the exports into $OUT. Arguments:
# NAME:STEPS pairs (the program's argv[2], kept short so that a fixture stays under 5 MB).
source "$(dirname "$0")/h200-env.sh"
cd "$ROOT/fixtures/real"
for spec in "$@"; do
  name=${spec%%:*} steps=${spec#*:}
  s=$SECONDS
  LD_LIBRARY_PATH=$ROOT/.libdw python3 -m nsync profile --nsys "$NSYS" -o /tmp/prof --name "$name" --no-keep-report \
    --json "/tmp/prof/$name.json" "$name.py" degraded "$steps" > "/tmp/prof-$name.log" 2>&1
  echo "== $name rc=$? $((SECONDS - s)) s"; grep -vE "^\| |^\{" "/tmp/prof-$name.log" | tail -22
  python3 - "/tmp/prof/$name.sqlite" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
marks = db.execute("SELECT count(*) FROM NVTX_EVENTS e LEFT JOIN StringIds s ON e.textId = s.id "
                   "WHERE coalesce(e.text, s.value) = 'nsync: optimizer step'").fetchone()[0]
print("optimizer-step marks:", marks)
PY
  python3 "$ROOT/scripts/sanitize_trace.py" "/tmp/prof/$name.sqlite" "$ROOT/fixtures/real" /home/user/proj --shrink
  xz -6 -T0 -c "/tmp/prof/$name.sqlite" > "$OUT/$name.sqlite.xz"
done 2>&1 | tee "$OUT/captures.log"
ls -la "$OUT"
