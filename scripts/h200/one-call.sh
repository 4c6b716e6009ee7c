#!/usr/bin/env bash
# The next device calls, for issue 44 (devices come rarely and leave 30 s after a call). `one-call.sh 1`:
# pyg_collate under torch.profiler (a short program, now captured from its warm-up's end), then timm_log_line
# both ways with 3 calibration runs pooled (their spread in the range): do the backends' verdicts meet where one
# calibration run each did not (2026-12-07: torch.profiler 1.45 ms "worth fixing", nsys 0.37 ms "nothing", truth
# 0.39 ms)? `one-call.sh 2`: hf_trainer the same way (torch.profiler 0.66 ms "worth fixing", nsys 0.23 ms
# "nothing", truth 0.16 ms). Each ends in $OUT/*.tar (scripts/both_ways_rows.py reads them). Its form of
# 2026-12-07 12:00 (git log) harvested held-out-9. Carry .whl and .libdw.
set -u
source "$(dirname "$0")/env.sh"
python3 -m pip install -q --no-deps "$ROOT"/.whl/*.whl 2>&1 | grep -v WARNING | tail -2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
backend() { bash "$ROOT/scripts/h200/torch-backend.sh" "$@" | tail -14; }
case ${1:-1} in
  1) TORCH_BACKEND_S=200 TAR=pyg backend fresh/pyg_collate:degraded:30
     TORCH_BACKEND_S=300 TAR=timm WITH_NSYS=1 AB=0 CALIBRATION_RUNS=3 KEEP_TRACES=0 backend \
       fresh/timm_log_line:degraded:30 ;;
  2) TORCH_BACKEND_S=${HF_S:-560} TAR=hf WITH_NSYS=1 AB=0 CALIBRATION_RUNS=3 KEEP_TRACES=0 backend real/hf_trainer:degraded ;;
esac
