"""On an H200 machine: what nsys (nsync profile's flags) adds to each CUDA call, and to plain Python.

`python3 scripts/h200/call-overhead.py run`: one process times iterations of fixed Python work plus M tiny kernel
launches made D Python frames deep, for each (M, D), in blocks; it prints one RESULT line per (M, D): the median
microseconds an iteration over the blocks, and their spread. `... run calls`: the same for two kinds of Python
work (WORKS), a sum over a range (one call, its loop in C: "sum") and 200 calls of a small Python function ("calls"),
with 0 and 8 launches 4 frames deep (scripts/h200/python-calls.sh). Run it unprofiled and under `nsys profile` with the
flags nsync profile uses: the difference per launch is what the profiler adds to one CUDA call, and the
difference with no launches what it adds to plain Python. scripts/h200/call-overhead.sh runs both, alternated
(fixtures/h200/profiler-cost/README.md).
"""

from __future__ import annotations

import json
import statistics
import sys
import time

LAUNCHES = (0, 8, 32)
DEPTHS = (4, 40)
BLOCKS = 15
ITERATIONS = 200
PYTHON_WORK = 2000  # integers summed per iteration: some 20 µs of plain Python
PYTHON_CALLS = 200  # calls of a small Python function per iteration (the "calls" work)


def small(value: int) -> int:
    return value * 3 + 1


def python_calls() -> None:
    value = 0
    for _ in range(PYTHON_CALLS):
        value = small(value) % 1000


def python_sum() -> None:
    sum(range(PYTHON_WORK))


WORKS = {"sum": python_sum, "calls": python_calls}


def main(works: tuple[str, ...] = ("sum",), depths: tuple[int, ...] = DEPTHS, launches: tuple[int, ...] = LAUNCHES):
    import torch

    x = torch.zeros(1, device="cuda")

    def launch(depth: int, count: int) -> None:
        if depth > 0:
            launch(depth - 1, count)
            return
        for _ in range(count):
            x.add_(1)

    results = []
    for work, depth, count in ((w, d, c) for w in works for d in depths for c in launches):
        python_work = WORKS[work]
        per_iteration_us = []
        for block in range(BLOCKS + 1):
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(ITERATIONS):
                python_work()
                launch(depth, count)
            torch.cuda.synchronize()
            if block:  # the first block warms up
                per_iteration_us.append((time.perf_counter() - start) / ITERATIONS * 1e6)
        results.append(
            {
                **({"work": work} if len(works) > 1 else {}),
                "launches": count,
                "depth": depth,
                "median_us": round(statistics.median(per_iteration_us), 3),
                "min_us": round(min(per_iteration_us), 3),
                "max_us": round(max(per_iteration_us), 3),
            }
        )
        print("RESULT", json.dumps(results[-1]), flush=True)


if __name__ == "__main__" and sys.argv[1:] == ["run"]:
    main()
elif __name__ == "__main__" and sys.argv[1:] == ["run", "calls"]:
    main(works=("sum", "calls"), depths=(4,), launches=(0, 8))
