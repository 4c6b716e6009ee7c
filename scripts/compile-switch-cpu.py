"""On a CPU machine with a real torch (in a venv of its own: `pip install torch numpy`), dynamo (eager backend)
tracing a compiled function that asks `nsync.fixed()`, under nsync's switch as `nsync measure` sets it (without
a GPU, so without the measure): VARIANT ``inside``, ``argument`` or ``disabled`` as in
scripts/h200-compile-switch.py. Run from the repository's root:

    NSYNC_AB=5 NSYNC_WINDOW=10:60 NSYNC_WINDOW_DIR=$(mktemp -d) NSYNC_CALIBRATE_DIR=$(mktemp -d) \\
    PYTHONPATH=nsync/nsys/inject:. VENV/bin/python scripts/compile-switch-cpu.py inside

Prints one RESULT line when the window ends the program (fixtures/h200/switched/README.md)."""

import atexit
import json
import sys

import torch
import torch._dynamo.utils

import nsync

variant = sys.argv[1]
model = torch.nn.Linear(64, 64)
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(8, 64)
ask = torch.compiler.disable(nsync.fixed) if variant == "disabled" else nsync.fixed


@torch.compile(backend="eager")
def loss_of(x: torch.Tensor, fixed: bool = False) -> tuple[torch.Tensor, int]:
    y = model(x)
    if fixed if variant == "argument" else ask():
        return y.square().mean(), 1
    return y.abs().mean(), 0


counts = {"variant": variant, "steps": 0, "differed": 0, "fixed_steps": 0}


@atexit.register
def _result() -> None:
    stats, recompiles = torch._dynamo.utils.counters["stats"], torch._dynamo.utils.counters["recompiles"]
    counts.update(unique_graphs=stats.get("unique_graphs", 0), recompiles=sum(recompiles.values()))
    print("RESULT " + json.dumps(counts))


for _ in range(1000):
    outside = nsync.fixed()
    loss, inside = loss_of(x, outside)
    counts["steps"] += 1
    counts["differed"] += inside != int(outside)
    counts["fixed_steps"] += int(outside)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
