#!/usr/bin/env bash
# Issues 43 and 44 in one device call (devices come rarely and leave 30 s after a call): held-out-8's harvest,
# timm_log_line's and pyg_collate's captures both ways (nsys and torch.profiler) with their truth timed
# unprofiled (20 block pairs each), then held-out-8's rewrites checked in what time is left (575 s in all).
# Carry .whl (held-out.sh says which wheels) and .libdw (env.sh).
set -u
start=$SECONDS
python3 -m pip install -q --no-deps .whl/*.whl 2>&1 | grep -v WARNING | tail -2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 python3 scripts/h200/harvest-syncs.py held-out-8 > "$OUT/harvest.log" 2>&1
echo "harvest rc=$? at $((SECONDS - start)) s"; tail -3 "$OUT/harvest.log" | cut -c1-600
WITH_NSYS=1 KEEP_TRACES=0 AB=0 timeout 260 bash scripts/h200/torch-backend.sh fresh/timm_log_line:degraded:30 fresh/pyg_collate:degraded:30
echo "captures at $((SECONDS - start)) s"
NSYNC_AB_BLOCKS=20 timeout 100 bash scripts/h200/fresh.sh ab timm_log_line pyg_collate
cp /tmp/ab-*.log "$OUT/" 2>/dev/null
echo "ab at $((SECONDS - start)) s"
left=$((575 - (SECONDS - start)))
[ $left -gt 60 ] && timeout $left python3 scripts/h200/check-rewrites.py held-out-8 > "$OUT/rewrites.log" 2>&1
echo "rewrites rc=$? at $((SECONDS - start)) s"; tail -25 "$OUT/rewrites.log"
rm -rf "$OUT/lightning-callbacks"; ls -la "$OUT"
