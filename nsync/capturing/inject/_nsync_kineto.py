"""Imported by nsync's sitecustomize when ``NSYNC_TORCH_TRACE`` names a file (``nsync profile --backend torch``):
the capture window runs torch.profiler instead of nsys.

The window's opening starts ``torch.profiler.profile`` (CPU and, on a CUDA build with a GPU, CUDA activity;
``with_stack=True`` for the Python frames), its closing stops it and writes the Chrome trace (gzip where the
name ends in ``.gz``; ``{pid}`` in the name is this process's id). Without a window (the whole run) it starts
once torch is imported and stops at exit. Each optimizer step is a ``record_function`` range named as nsys's
NVTX step mark, and the program's own ``torch.cuda.nvtx.range_push``/``range_pop`` are mirrored as
``record_function`` ranges, so that the trace holds the same steps an nsys capture would.

Like the sitecustomize, this module imports nothing of nsync's and raises nothing into the program.
"""

import contextlib
import os
import sys

_MARK = "nsync: optimizer step"  # nsync.marks.STEP_MARK
_TRACE = os.environ.get("NSYNC_TORCH_TRACE", "")
_state = {"profiler": None, "written": False}
_open_ranges: list = []  # the record_function ranges entered by range_push, innermost last (None: not entered)
_open_marks: list = []


def start():
    """Start the profiler (once; not again after its trace was written)."""
    if _state["profiler"] is not None or _state["written"]:
        return
    profiler = new_profiler()
    profiler.start()
    _state["profiler"] = profiler


def new_profiler():
    """torch.profiler as nsync captures with it (also nsync.capture's): CPU and, on a CUDA build with a GPU,
    CUDA activity and CUPTI's sync events (which stream each sync waited on); Python frames."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities, extra = [ProfilerActivity.CPU], {}
    if torch.version.cuda and torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
        with contextlib.suppress(AttributeError, TypeError):  # a torch without them: syncs wait on the device
            extra["experimental_config"] = torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)
    return profile(activities=activities, with_stack=True, **extra)


def stop():
    """Stop the profiler and write its trace (once)."""
    profiler = _state["profiler"]
    if profiler is None or _state["written"]:
        return
    _state["written"] = True
    _state["profiler"] = None
    torch = sys.modules["torch"]
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()  # the GPU's last work ends inside the trace
    while _open_marks:
        exit_range(_open_marks.pop())
    profiler.stop()
    profiler.export_chrome_trace(_TRACE.replace("{pid}", str(os.getpid())))


def profiling():
    return _state["profiler"] is not None


def enter_range(name):
    """A record_function range begun (its end: ``exit_range``)."""
    from torch.autograd.profiler import record_function

    scope = record_function(name)
    scope.__enter__()
    return scope


def exit_range(scope):
    if scope is not None:
        scope.__exit__(None, None, None)


def mark_begin(which):
    """An optimizer step begins: its range, and inside it the range naming ``which`` optimizer, while the
    profiler runs."""
    if profiling():
        _open_marks.append((enter_range(_MARK), enter_range(which)))


def mark_end():
    if _open_marks:
        outer, inner = _open_marks.pop()
        exit_range(inner)
        exit_range(outer)


def mirror_ranges(nvtx_module):
    """The program's NVTX ranges (torch.cuda.nvtx) also as record_function ranges, while the profiler runs."""
    push, pop = nvtx_module.range_push, nvtx_module.range_pop

    def range_push(msg, *args, **kwargs):
        _open_ranges.append(enter_range(msg) if profiling() and isinstance(msg, str) else None)
        return push(msg, *args, **kwargs)

    def range_pop(*args, **kwargs):
        if _open_ranges:
            exit_range(_open_ranges.pop())
        return pop(*args, **kwargs)

    nvtx_module.range_push, nvtx_module.range_pop = range_push, range_pop
