"""nsync.testing.sync_free on the lab scenarios, on a CUDA machine: each scenario's step once in each mode,
after two warm-up steps, under sync_free. Prints one JSON line per scenario and mode: passed, or the syncs
found (where, pattern) and sync_free's message. Run from the repository root: python scripts/h200/sync-free.py"""

import json
import runpy
import sys
from pathlib import Path

import torch

LAB = Path(__file__).resolve().parents[2] / "fixtures" / "h200"
sys.path[:0] = [str(LAB), str(LAB.parent.parent)]
import harness  # noqa: E402  (fixtures/h200/harness.py)

from nsync.testing import SyncFound, sync_free  # noqa: E402

SCENARIOS = ["w_print", "w_item", "w_mask", "w_tuple", "w_list", "w_two", "w_param", "w_hidden"]

for name in SCENARIOS:
    for mode in ("healthy", "degraded"):
        steps: list = []
        harness.run = lambda workload, mode, step, found=steps, **_: found.append(step)
        sys.argv = [f"{name}.py", mode]
        runpy.run_path(str(LAB / f"{name}.py"), run_name="__main__")
        step = steps[0]
        for _ in range(2):
            step()
        torch.cuda.synchronize()
        result = {"scenario": name, "mode": mode}
        try:
            with sync_free():
                step()
            result["passed"] = True
        except SyncFound as found:
            result["passed"] = False
            result["syncs"] = sorted({(s.where, s.function, s.pattern) for s in found.syncs})
            result["count"] = len(found.syncs)
            result["message"] = str(found)
        torch.cuda.synchronize()
        print(json.dumps(result), flush=True)
