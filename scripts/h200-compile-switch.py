"""On an H200 machine, under `nsync measure` with one command: does `nsync.fixed()` asked inside a
`torch.compile`d function follow the switch? VARIANT ``inside``: the function asks; ``argument``: the loop asks
and passes the answer in; ``disabled``: the function asks through `torch.compiler.disable(nsync.fixed)`.
Prints one RESULT line: steps, those where the compiled function's answer differed from the loop's, the graphs
dynamo compiled and its recompilations (fixtures/h200/switched/README.md, "Asked inside torch.compile")."""

import atexit
import json
import sys

import torch
import torch._dynamo.utils

import nsync

variant, steps = sys.argv[1], int(sys.argv[2])
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512)).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(256, 512, device="cuda")
ask = torch.compiler.disable(nsync.fixed) if variant == "disabled" else nsync.fixed


@torch.compile
def loss_of(x: torch.Tensor, fixed: bool = False) -> tuple[torch.Tensor, int]:
    y = model(x)
    if fixed if variant == "argument" else ask():
        return y.square().mean(), 1
    return y.abs().mean(), 0


counts = {"variant": variant, "steps": 0, "differed": 0}


@atexit.register  # nsync measure ends the program after its steps, from inside an optimizer step
def _result() -> None:
    stats = torch._dynamo.utils.counters["stats"]
    counts.update(
        unique_graphs=stats.get("unique_graphs", 0), recompiles=sum(torch._dynamo.utils.counters["recompiles"].values())
    )
    print("RESULT " + json.dumps(counts), file=sys.stderr)


for _ in range(steps):
    outside = nsync.fixed()
    loss, inside = loss_of(x, outside)
    counts["steps"] += 1
    counts["differed"] += inside != int(outside)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
