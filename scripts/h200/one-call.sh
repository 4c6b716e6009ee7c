#!/usr/bin/env bash
# Issues 44 and 43 in one device call (devices come rarely and leave 30 s after a call): timm_log_line's and
# pyg_collate's captures both ways (nsys and torch.profiler) with their truth timed unprofiled (20 block pairs
# each, and hf_trainer's, whose two backends disagree), then held-out-8's harvest and its rewrites checked in
# what time is left (${ONE_CALL_S:-575} s in all; each step's output is in $OUT before the next begins).
# Carry .whl (held-out.sh says which wheels) and .libdw (env.sh).
set -u
start=$SECONDS
left() { echo $((${ONE_CALL_S:-575} - (SECONDS - start))); }
python3 -m pip install -q --no-deps .whl/*.whl 2>&1 | grep -v WARNING | tail -2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
WITH_NSYS=1 KEEP_TRACES=0 AB=0 timeout 260 bash scripts/h200/torch-backend.sh \
  fresh/timm_log_line:degraded:30 fresh/pyg_collate:degraded:30
echo "captures at $((SECONDS - start)) s"
NSYNC_AB_BLOCKS=20 timeout 100 bash scripts/h200/fresh.sh ab timm_log_line pyg_collate
FRESH_DIR=fixtures/real NSYNC_AB_BLOCKS=20 timeout 60 bash scripts/h200/fresh.sh ab hf_trainer  # its truth here
cp /tmp/ab-*.log "$OUT/" 2>/dev/null
echo "ab at $((SECONDS - start)) s"
in_time_left() {  # NAME LINES SCRIPT: SCRIPT held-out-8 in the time left (a minute at least); its log's last LINES
  local s; s=$(left)
  if [ "$s" -le 60 ]; then echo "$1 not started: $s s left"; return; fi
  timeout "$s" python3 "scripts/h200/$3" held-out-8 > "$OUT/$1.log" 2>&1
  echo "$1 rc=$? at $((SECONDS - start)) s"; tail -"$2" "$OUT/$1.log" | cut -c1-600
}
in_time_left harvest 3 harvest-syncs.py
in_time_left rewrites 25 check-rewrites.py
rm -rf "$OUT/lightning-callbacks"; ls -la "$OUT"
