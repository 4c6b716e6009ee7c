"""Put on PYTHONPATH by ``nsync profile``: marks every optimizer step with an NVTX range, or, in the
calibration run (``NSYNC_CALIBRATE_DIR`` set), times steps with CUDA events instead.

When ``torch.optim.optimizer`` is imported, global step hooks (PyTorch's
``register_optimizer_step_pre_hook`` / ``..._post_hook``, called for every optimizer) open and close an
NVTX range named ``nsync: optimizer step``. That costs about a microsecond a step and no GPU work; nsync
then times each step from one optimizer step's end to the next.

In the calibration run (the program without the profiler) the post hook records a CUDA event instead,
and so does every ``torch.cuda.nvtx.range_push`` (per range name, digits read as ``N``). An event costs a
few microseconds of host time and never waits; at exit the events are read and the GPU time between
successive ones is written to ``NSYNC_CALIBRATE_DIR/calibration-<pid>.json``: the program's own step
times, unprofiled.

Nothing else changes: the ``sitecustomize`` this one shadows (if any) is run after it, no module is
imported early, and an error here is printed and never raised into the program.
"""

import atexit
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import re
import sys

_MARK = "nsync: optimizer step"
_CALIBRATE_DIR = os.environ.get("NSYNC_CALIBRATE_DIR")
_MAX_EVENTS = 20_000  # per source: a long run keeps its first steps only
_MAX_SOURCES = 64  # range names timed
_events: dict = {}  # source ("marks", "nvtx:NAME") -> CUDA events in record order


def _record(source):
    import torch

    if not torch.cuda.is_initialized() or torch.cuda.is_current_stream_capturing():
        return  # never start CUDA (a data-loader worker, a CPU-only phase), never record into a CUDA graph
    events = _events.get(source)
    if events is None:
        if len(_events) >= _MAX_SOURCES:
            return
        if not _events:  # registered after torch's own exit handlers, so that it runs before them
            atexit.register(_safely, "write the calibration timings", _write_timings)
        events = _events[source] = []
    if len(events) < _MAX_EVENTS:
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        events.append(event)


def _write_timings():
    timed = {k: v for k, v in _events.items() if len(v) >= 2}
    if not timed:
        return
    import torch

    torch.cuda.synchronize()
    intervals = {}
    for source, events in timed.items():  # no itertools.pairwise: the program's Python may be older than 3.10
        intervals[source] = [round(a.elapsed_time(b) * 1e6) for a, b in zip(events[:-1], events[1:])]  # noqa: RUF007
    path = os.path.join(_CALIBRATE_DIR, f"calibration-{os.getpid()}.json")
    with open(path, "w") as handle:
        # nsync.calibration.RUN_SCHEMA, written as a literal: this file must not import nsync
        json.dump({"schema": "nsync.calibration-run/1", "intervals_ns": intervals}, handle)


_failed: set = set()


def _safely(what, fn, *args):
    try:
        return fn(*args)
    except Exception as err:  # never break the user's program; say so once
        if what not in _failed:
            _failed.add(what)
            print(f"nsync: could not {what} ({err})", file=sys.stderr)
        return None


def _install_step_hooks(optimizer_module):
    if _CALIBRATE_DIR:

        def after_step(optimizer, args, kwargs):
            _safely("time an optimizer step", _record, "marks")

        optimizer_module.register_optimizer_step_post_hook(after_step)
        return
    try:
        from torch.cuda import nvtx
    except Exception:  # no CUDA build: nothing to mark
        return

    def before_step(optimizer, args, kwargs):
        nvtx.range_push(_MARK)

    def after_step(optimizer, args, kwargs):
        nvtx.range_pop()

    optimizer_module.register_optimizer_step_pre_hook(before_step)
    optimizer_module.register_optimizer_step_post_hook(after_step)


def _time_ranges(nvtx_module):
    """Calibration run: every range_push of the program also records an event for its range name."""
    push = nvtx_module.range_push
    digits = re.compile(r"\d+")

    def range_push(msg, *args, **kwargs):
        if isinstance(msg, str):
            _safely("time an NVTX range", _record, "nvtx:" + digits.sub("N", msg))
        return push(msg, *args, **kwargs)

    nvtx_module.range_push = range_push


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loader of each module in ``installs`` to patch it once it ran."""

    def __init__(self, installs):
        self.installs = dict(installs)

    def find_spec(self, name, path, target=None):
        install = self.installs.pop(name, None)
        if install is None:
            return None
        if not self.installs:
            sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run_module = spec.loader.exec_module

        def exec_module(module):
            run_module(module)
            _safely(f"patch {name}", install, module)

        spec.loader.exec_module = exec_module
        return spec


def _run_shadowed_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        sys.modules["sitecustomize"] = module
        spec.loader.exec_module(module)


_installs = {"torch.optim.optimizer": _install_step_hooks}
if _CALIBRATE_DIR:
    _installs["torch.cuda.nvtx"] = _time_ranges
sys.meta_path.insert(0, _AfterImport(_installs))
_run_shadowed_sitecustomize()
