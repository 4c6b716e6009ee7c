"""On an H200 machine: does the profiler slow the GPU's own work between queued kernels? One process queues
QUEUED small kernels of one kind behind a large matmul (so that they run back to back once it ends) and times
them with CUDA events, in BLOCKS blocks (the first warms up); it prints one RESULT line per kind: the median
nanoseconds a queued kernel took on the GPU (its run and the gap before the next), their spread, and the host's
time to launch them (under the matmul's, or they did not queue). Run it unprofiled and under nsys with nsync
profile's flags (scripts/h200/dispatch-gap.sh): the difference is what the profiler adds to each queued kernel,
and the capture's own kernel rows say what the replay sees (fixtures/h200/profiler-cost/README.md)."""

from __future__ import annotations

import json
import statistics
import time

import torch

QUEUED = 1000
BLOCKS = 11
MATMUL = 8192  # fp32, about 20 ms on an H200: longer than the host takes to launch QUEUED kernels under nsys


def main() -> None:
    a = torch.randn(MATMUL, MATMUL, device="cuda")
    kinds = {
        "add_1": torch.zeros(1, device="cuda"),  # one element
        "mul_256x8": torch.randn(256, 8, device="cuda"),  # w_hidden's tiny kernels
        "mul_1m": torch.randn(1 << 20, device="cuda"),  # a million elements
    }
    for kind, t in kinds.items():
        per_kernel_ns, host_ms, matmul_ms = [], [], []
        for block in range(BLOCKS):
            torch.cuda.synchronize()
            before, begin, end = (torch.cuda.Event(enable_timing=True) for _ in range(3))
            before.record()
            a @ a
            begin.record()
            launched = time.perf_counter()
            for _ in range(QUEUED):
                t.mul_(1.0000001)
            launched = time.perf_counter() - launched
            end.record()
            end.synchronize()
            if block:
                per_kernel_ns.append(begin.elapsed_time(end) * 1e6 / QUEUED)
                host_ms.append(launched * 1e3)
                matmul_ms.append(before.elapsed_time(begin))
        result = {
            "kind": kind,
            "queued": QUEUED,
            "median_ns": round(statistics.median(per_kernel_ns), 1),
            "min_ns": round(min(per_kernel_ns), 1),
            "max_ns": round(max(per_kernel_ns), 1),
            "host_launch_ms": round(statistics.median(host_ms), 3),
            "matmul_ms": round(statistics.median(matmul_ms), 3),
        }
        print("RESULT", json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
