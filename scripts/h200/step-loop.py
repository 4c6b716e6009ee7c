"""On an H200 machine: an inference loop without an optimizer that marks its steps with `nsync.step()` and
reads each batch's top score with `.item()` (the fix: keep the step's scores on the GPU, read them at the end).
`nsync measure` (one command) switches and times it by those marks; `nsync profile` finds its steps by them
(fixtures/h200/switched/README.md, "A loop without an optimizer")."""

import sys

import torch

import nsync

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(8)]).cuda().eval()
batch = torch.randn(64, 1024, device="cuda")
kept, read = [], []
with torch.no_grad():
    for _ in range(steps):
        scores = model(batch).softmax(-1)
        for row in scores[:16]:
            if nsync.fixed():
                kept.append(row.max())
            else:
                read.append(row.max().item())
        nsync.step()
print("read", len(read), "kept", len(kept))
