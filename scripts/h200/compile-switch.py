"""Does `nsync.fixed()` asked inside a `torch.compile`d function follow nsync measure's switch? VARIANT
``inside``: the function asks; ``argument``: the loop asks and passes the answer in; ``disabled``: the function
asks through `torch.compiler.disable(nsync.fixed)`. Prints one RESULT line to stderr when the program ends:
steps, those where the compiled function's answer differed from the loop's, the steps run fixed, the graphs
dynamo compiled and its recompilations (fixtures/h200/switched/README.md, "A loop without an optimizer, and a
switch asked inside torch.compile").

On an H200 machine, under `nsync measure` with one command:

    nsync measure --runs 1 --steps 60 --block-steps 5 "scripts/h200/compile-switch.py inside 1000"

On a CPU with a real torch in a venv of its own (dynamo's eager backend; the switch set as the measure sets it,
without the measure, which needs a GPU), from the repository's root:

    NSYNC_AB=5 NSYNC_WINDOW=10:60 NSYNC_WINDOW_DIR=$(mktemp -d) NSYNC_CALIBRATE_DIR=$(mktemp -d) \\
    PYTHONPATH=nsync/capturing/inject:. VENV/bin/python scripts/h200/compile-switch.py inside 1000 cpu
"""

import atexit
import json
import sys

import torch
import torch._dynamo.utils

import nsync

variant, steps = sys.argv[1], int(sys.argv[2])
device = sys.argv[3] if len(sys.argv) > 3 else "cuda"
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(256, 512, device=device)
ask = torch.compiler.disable(nsync.fixed) if variant == "disabled" else nsync.fixed


@torch.compile(backend="inductor" if device == "cuda" else "eager")
def loss_of(x: torch.Tensor, fixed: bool = False) -> tuple[torch.Tensor, int]:
    y = model(x)
    if fixed if variant == "argument" else ask():
        return y.square().mean(), 1
    return y.abs().mean(), 0


counts = {"variant": variant, "steps": 0, "differed": 0, "fixed_steps": 0}


@atexit.register  # nsync's window ends the program after its steps, from inside an optimizer step
def _result() -> None:
    stats, recompiles = torch._dynamo.utils.counters["stats"], torch._dynamo.utils.counters["recompiles"]
    counts.update(unique_graphs=stats.get("unique_graphs", 0), recompiles=sum(recompiles.values()))
    print("RESULT " + json.dumps(counts), file=sys.stderr)


for _ in range(steps):
    outside = nsync.fixed()
    loss, inside = loss_of(x, outside)
    counts["steps"] += 1
    counts["differed"] += inside != int(outside)
    counts["fixed_steps"] += int(outside)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
