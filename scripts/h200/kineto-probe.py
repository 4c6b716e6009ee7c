"""Probe: run a program under torch.profiler (CPU + CUDA activity, Python stacks) and write its Chrome trace.

    python3 kineto-probe.py OUT.json[.gz] SCRIPT ARGS...

torch.cuda.nvtx ranges are mirrored as record_function ranges (so a lab scenario's "step" ranges appear in the
trace); with optimizer steps, the profiler starts after WARMUP (10) of them and stops after STEPS (40) more,
calling prof.step() at each; without, it covers the whole run. Used once to see what torch 2.11's Kineto writes.
"""

import atexit
import os
import runpy
import sys

import torch
from torch.profiler import ProfilerActivity, profile

out, script = sys.argv[1], sys.argv[2]
sys.argv = sys.argv[2:]
sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
warmup, steps = int(os.environ.get("WARMUP", 10)), int(os.environ.get("STEPS", 40))
prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], with_stack=True)
state = {"on": False, "done": 0, "stopped": False}
ranges = []
push, pop = torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop


def range_push(msg, *a, **k):
    rf = torch.autograd.profiler.record_function(msg)
    rf.__enter__()
    ranges.append(rf)
    return push(msg, *a, **k)


def range_pop():
    if ranges:
        ranges.pop().__exit__(None, None, None)
    return pop()


torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop = range_push, range_pop


def stop():
    if state["on"] and not state["stopped"]:
        state["stopped"] = True
        torch.cuda.synchronize()
        prof.stop()
        prof.export_chrome_trace(out)
        print(f"PROBE wrote {out} after {state['done']} optimizer steps", file=sys.stderr, flush=True)


def after_step(optimizer, args, kwargs):
    state["done"] += 1
    if state["done"] == warmup and not state["on"]:
        prof.start()
        state["on"] = True
    elif state["on"] and not state["stopped"]:
        prof.step()
        if state["done"] >= warmup + steps:
            stop()
            os._exit(0)


from torch.optim.optimizer import register_optimizer_step_post_hook

register_optimizer_step_post_hook(after_step)
if os.environ.get("WHOLE") == "1":
    prof.start()
    state["on"] = True
atexit.register(stop)
runpy.run_path(script, run_name="__main__")
