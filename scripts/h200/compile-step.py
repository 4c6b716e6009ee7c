"""Does `nsync.step()` called inside a `torch.compile`d function mark, count and window the steps as it does in
the loop? VARIANT ``inside``: the compiled function calls it; ``loop``: the loop does. An inference loop of
STEPS steps (no optimizer); prints one RESULT line to stderr when the program ends (nsync's window may end it
from inside the call): steps begun, the graphs dynamo compiled and its recompilations. On an H200 machine,
`nsync profile --json OUT.json scripts/h200/compile-step.py inside 200` (fixtures/h200/switched/README.md);
on a CPU with a real torch in a venv of its own, add `cpu` (dynamo's eager backend) and set the window as
nsync does: NSYNC_WINDOW=10:40 NSYNC_WINDOW_DIR=$(mktemp -d) PYTHONPATH=nsync/capturing/inject:. VENV/bin/python ..."""

import atexit
import json
import sys

import torch
import torch._dynamo.utils

import nsync

variant, steps = sys.argv[1], int(sys.argv[2])
device = sys.argv[3] if len(sys.argv) > 3 else "cuda"
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512)).to(device).eval()
x = torch.randn(256, 512, device=device)
counts = {"variant": variant, "steps_begun": 0}


@torch.compile(backend="inductor" if device == "cuda" else "eager")
def infer(x: torch.Tensor) -> torch.Tensor:
    y = model(x).softmax(-1)
    if variant == "inside":
        nsync.step()
    return y


@atexit.register
def _result() -> None:
    stats, recompiles = torch._dynamo.utils.counters["stats"], torch._dynamo.utils.counters["recompiles"]
    counts.update(unique_graphs=stats.get("unique_graphs", 0), recompiles=sum(recompiles.values()))
    print("RESULT " + json.dumps(counts), file=sys.stderr)


with torch.no_grad():
    for _ in range(steps):
        counts["steps_begun"] += 1
        infer(x)
        if variant == "loop":
            nsync.step()
