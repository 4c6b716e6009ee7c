#!/usr/bin/env bash
# Issue 44's device calls of 2026-12-07 15:29-15:37 (one H100; fixtures/kineto/h100/both-ways.log). `one-call.sh 1`:
# pyg_collate under torch.profiler, captured from its warm-up's end, then timm_log_line both ways with 3
# calibration runs pooled. `one-call.sh 2`: hf_trainer the same way (HF_S seconds, 560 unless given). Each ends in
# $OUT/*.tar (scripts/both_ways_rows.py reads them). `one-call.sh 3`: pyg_collate and tv_seg_iou, each timed in
# 20 paired unprofiled blocks, then captured both ways, 3 calibration runs each; `4`: timm_gradnorm and timm_log_line
# so; `5`: tv_seg_iou again, after the fix of its line. Its form of 2026-12-07 12:00 (git log) harvested held-out-9.
# Carry .whl and .libdw.
set -u
source "$(dirname "$0")/env.sh"
python3 -m pip install -q --no-deps "$ROOT"/.whl/*.whl 2>&1 | grep -v WARNING | tail -2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
backend() { bash "$ROOT/scripts/h200/torch-backend.sh" "$@" | tail -14; }
case ${1:-1} in
  1) TORCH_BACKEND_S=200 TAR=pyg backend fresh/pyg_collate:degraded:30
     TORCH_BACKEND_S=300 TAR=timm WITH_NSYS=1 AB=0 CALIBRATION_RUNS=3 KEEP_TRACES=0 backend \
       fresh/timm_log_line:degraded:30 ;;
  3) export CALIBRATION_RUNS=3 WITH_NSYS=1
     TORCH_BACKEND_S=260 TAR=pyg backend fresh/pyg_collate:degraded:30
     TORCH_BACKEND_S=260 TAR=seg backend fresh/tv_seg_iou:degraded:60 ;;
  4) export CALIBRATION_RUNS=3 WITH_NSYS=1
     TORCH_BACKEND_S=250 TAR=gradnorm backend real/timm_gradnorm:degraded:60
     TORCH_BACKEND_S=290 TAR=timm KEEP_TRACES=0 backend fresh/timm_log_line:degraded:30 ;;
  5) CALIBRATION_RUNS=3 WITH_NSYS=1 TORCH_BACKEND_S=220 TAR=seg2 KEEP_TRACES=0 backend fresh/tv_seg_iou:degraded:60 ;;
  2) TORCH_BACKEND_S=${HF_S:-560} TAR=hf WITH_NSYS=1 AB=0 CALIBRATION_RUNS=3 KEEP_TRACES=0 backend real/hf_trainer:degraded ;;
esac
