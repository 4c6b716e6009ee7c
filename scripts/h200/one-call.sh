#!/usr/bin/env bash
# Issue 44's captures in one device call (devices come rarely and leave 30 s after a call): timm_log_line,
# pyg_collate and hf_trainer captured both ways (nsys and torch.profiler, the same commands), torch.profiler's
# traces kept (hf_trainer's backends disagree; its trace says why). Their truth was timed unprofiled on the
# H100 on 2026-12-07 (fixtures/kineto/h100/ab-timings.log). ${ONE_CALL_S:-520} s in all.
# Carry .whl (held-out.sh says which wheels) and .libdw (env.sh).
set -u
python3 -m pip install -q --no-deps .whl/*.whl 2>&1 | grep -v WARNING | tail -2
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
WITH_NSYS=1 AB=0 TORCH_BACKEND_S=$((${ONE_CALL_S:-520} - 40)) bash scripts/h200/torch-backend.sh \
  fresh/pyg_collate:degraded:30 fresh/timm_log_line:degraded:30 real/hf_trainer:degraded
