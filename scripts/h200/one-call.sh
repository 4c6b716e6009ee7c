#!/usr/bin/env bash
# The next device call for issues 43 and 44 (devices come rarely and leave 30 s after a call):
# 1. held-out-9's harvest (scripts/h200/held_out_9.py), beside
# 2. pyg_collate under torch.profiler (15 steps, no calibration run), and where Kineto's JSON is invalid, what
#    surrounds the byte the decoder names ($OUT/pyg-context.txt): is it a name holding `", "` (pytorch #113001)?
# 3. then, alone (it edits the installed libraries), held-out-8's rewrites checked again with the rewriter that no
#    longer passes a tensor as a device, in the time left of ONE_CALL_S.
# Its form of 2026-12-07 (git log) captured timm_log_line, pyg_collate and hf_trainer both ways.
# Carry .whl (held-out.sh says which wheels) and .libdw (env.sh).
set -u
start=$SECONDS
python3 -m pip install -q --no-deps .whl/*.whl 2>&1 | grep -v WARNING | tail -2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
timeout 280 python3 scripts/h200/harvest-syncs.py held-out-9 > "$OUT/harvest.log" 2>&1 &
harvest=$!
(cd fixtures/fresh && timeout 240 python3 -m nsync profile --backend torch --no-calibrate -o "$OUT/p" --name pyg \
  pyg_collate.py degraded 15 > "$OUT/pyg.log" 2>&1)
echo "pyg rc=$?"; tail -3 "$OUT/pyg.log"
at=$(grep -o 'byte [0-9]*' "$OUT/pyg.log" | grep -o '[0-9]*' | head -1)
[ -n "$at" ] && python3 scripts/h200/json-context.py "$OUT/p/pyg.pt.trace.json.gz" "$at" > "$OUT/pyg-context.txt"
ls -la "$OUT/p"; rm -rf "$OUT/p"
wait $harvest; echo "harvest rc=$?"; grep -v "^ \|^Traceback" "$OUT/harvest.log" | tail -12 | cut -c1-300
left=$(( ${ONE_CALL_S:-570} - (SECONDS - start) ))
[ "$left" -gt 60 ] && timeout "$left" python3 scripts/h200/check-rewrites.py held-out-8 > "$OUT/rewrites.log" 2>&1
echo "rewrites rc=$? (of ${left} s)"; tail -12 "$OUT/rewrites.log" | cut -c1-400
rm -rf "$OUT/lightning-tuning" "$OUT/lightning-callbacks" "$OUT/lightning-ninth"; ls -la "$OUT"
