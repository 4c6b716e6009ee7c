#!/usr/bin/env bash
# The next device call, for issue 44 (devices come rarely and leave 30 s after a call): pyg_collate under
# torch.profiler (a short program, now captured from its warm-up's end), then timm_log_line both ways with --calibration-runs 3 (three unprofiled runs pooled, their spread in the
# range): do the backends' verdicts meet where one calibration run each did not (2026-12-07: torch.profiler
# 1.45 ms "worth fixing", nsys 0.37 ms "nothing", truth 0.39 ms)? Its form of 2026-12-07 12:00
# (git log) harvested held-out-9 and checked held-out-8's rewrites. Carry .whl and .libdw.
set -u
source "$(dirname "$0")/env.sh"
python3 -m pip install -q --no-deps "$ROOT"/.whl/*.whl 2>&1 | grep -v WARNING | tail -2
TORCH_BACKEND_S=200 KEEP_TRACES=1 bash "$ROOT/scripts/h200/torch-backend.sh" fresh/pyg_collate:degraded:30 | tail -12
mkdir -p "$OUT/c"
cd "$ROOT/fixtures/fresh"
for backend in torch nsys; do
  nsys=(); [ "$backend" = nsys ] && nsys=(--nsys "$NSYS" --no-keep-report)
  LD_LIBRARY_PATH=$ROOT/.libdw timeout 170 python3 -m nsync profile --backend "$backend" "${nsys[@]}" \
    --calibration-runs 3 -o "$OUT/c" --name "timm_$backend" --json "$OUT/c/timm_$backend.json" \
    timm_log_line.py degraded 30 > "$OUT/c/timm_$backend.log" 2>&1
  echo "== timm_log_line ($backend, 3 calibration runs) rc=$?"
  grep -E "^verdict|^#1 |calibration: timed|median steps" "$OUT/c/timm_$backend.log" | head -5
done
rm -f "$OUT"/c/*.sqlite "$OUT"/c/*.pt.trace.json.gz "$OUT"/c/*.html
(cd "$OUT" && tar cf calibration-runs.tar c && rm -rf c && ls -la)
