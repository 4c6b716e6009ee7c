#!/usr/bin/env bash
# On a lent GPU machine, in one device call (issue 43): fixtures/fresh12's captures and paired timings, the third
# held-out set's syncing lines, and whether torch.profiler captures hold Kineto's cuda_sync events. Each part
# starts only while its share of the call is left (T0: the call's start, epoch seconds), most needed first.
source "$(dirname "$0")/env.sh"
T0=${T0:-$(date +%s)}
left() { echo $(( T0 + ${LIMIT_S:-540} - $(date +%s) )); }
export FRESH_DIR=fixtures/fresh12 NSYNC_AB_BLOCKS=${NSYNC_AB_BLOCKS:-4}
NSYNC_DEADLINE=$(( T0 + 200 )) bash "$ROOT/scripts/h200/fresh.sh" capture gan_dcgan:60 loader_bound:60
cp /tmp/prof-*.log "$OUT/" 2>/dev/null
[ "$(left)" -gt 200 ] && bash "$ROOT/scripts/h200/fresh.sh" ab gan_dcgan loader_bound
[ "$(left)" -gt 100 ] && (cd "$ROOT" && timeout $(( $(left) - 60 )) python3 scripts/h200/harvest-syncs.py held-out-3 \
  > "$OUT/harvest.log" 2>&1; echo "== harvest rc=$?"; tail -3 "$OUT/harvest.log")
if [ "$(left)" -gt 45 ]; then
  (cd "$ROOT/fixtures/h200" && timeout $(( $(left) - 10 )) python3 -m nsync profile --backend torch --whole-run \
    --no-calibrate -o /tmp/tb --name w_item_torch --json "$OUT/w_item_torch.json" w_item.py degraded \
    > "$OUT/w_item_torch.log" 2>&1; echo "== torch capture rc=$?")
  python3 - <<'PY' | tee "$OUT/cuda-sync-events.txt"
import collections, glob, gzip, json
for path in glob.glob("/tmp/tb/*.pt.trace.json.gz"):
    events = json.load(gzip.open(path))["traceEvents"]
    print(path, collections.Counter(e.get("name") for e in events if e.get("cat") == "cuda_sync"))
PY
fi
echo "== $(left) s left"
