"""Put on PYTHONPATH by ``nsync profile``: marks every optimizer step with an NVTX range, opens and closes
the capture window, or, in the calibration run (``NSYNC_CALIBRATE_DIR`` set), times steps with CUDA events.

When ``torch.optim.optimizer`` is imported, global step hooks (PyTorch's
``register_optimizer_step_pre_hook`` / ``..._post_hook``, called for every optimizer) open and close an
NVTX range named ``nsync: optimizer step``, and inside it one naming the optimizer (``nsync: optimizer 2``,
numbered as they first stepped). That costs about a microsecond a step and no GPU work; nsync then times each
step from one optimizer step's end to the next, or, where several optimizers step in turn (a GAN), from one
iteration's last to the next. Each batch a DataLoader hands the program is in a range too (``nsync: data
loader``): the host's wait for its data.

A loop without an optimizer (inference, serving) may call ``nsync.step()`` at the end of each of its steps:
it does at once what an optimizer step's two hooks do (:func:`step`), so that such a loop is marked, windowed,
calibrated and switched by its own steps.

The capture window (``NSYNC_WINDOW=W:K``) is counted by the same hooks: ``_nsync_window``, beside this file,
says how.

In the calibration run (the program without the profiler) the post hook records a CUDA event instead,
and so does every ``torch.cuda.nvtx.range_push`` (per range name, digits read as ``N``). An event costs a
few microseconds of host time and never waits; at exit the events are read and the GPU time between
successive ones is written to ``NSYNC_CALIBRATE_DIR/calibration-<pid>.json``: the program's own step
times, unprofiled, with where the window began in each.

Under ``nsync profile --backend torch`` (``NSYNC_TORCH_TRACE`` set) the window starts and stops torch.profiler
instead of an NVTX range, and the step marks are ``record_function`` ranges (_nsync_kineto, beside this file).

``nsync measure`` given one command (``NSYNC_AB=B``, B steps a block) runs the program's two versions in one
process: ``nsync.fixed()`` (nsync/capturing/ab.py) asks :func:`fixed` here which one the step in progress runs. During
the window's warm-up they alternate step by step (both warm up); from the window on, in blocks of B optimizer
steps, A B B A A B B A... (a drift of the host moves both alike). The optimizer steps ended when the program
last asked are written with the timings (none: it never asked).

Nothing else changes: the ``sitecustomize`` this one shadows (if any) is run after it, no module is
imported early, and an error here is printed and never raised into the program.
"""

import atexit
import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import itertools
import json
import os
import re
import sys
import threading
import weakref

import _nsync_window  # type: ignore[import-not-found]  # beside this file, first on the program's sys.path

_MARK = "nsync: optimizer step"  # nsync.capturing.inject.STEP_MARK
_WINDOW_RANGE = "nsync-window"  # nsync.capturing.inject.WINDOW_RANGE
_DATA_MARK = "nsync: data loader"  # nsync.marks.DATA_MARK
_OPTIMIZER_MARK = "nsync: optimizer {}"  # nsync.marks.OPTIMIZER_MARK: which optimizer steps, in its step's range
_optimizers = weakref.WeakKeyDictionary()  # type: weakref.WeakKeyDictionary[object, int]
# optimizer -> its number, in the order they first stepped (1, 2...)
_CALIBRATE_DIR = os.environ.get("NSYNC_CALIBRATE_DIR")
_MAX_EVENTS = 20_000  # per source: a long run keeps its first steps only
_MAX_SOURCES = 64  # range names timed
_events: dict = {}  # source ("marks", "nvtx:NAME") -> CUDA events in record order
# nsync profile --backend torch: the window runs torch.profiler (_nsync_kineto, beside this file)
_kineto = (
    importlib.import_module("_nsync_kineto") if os.environ.get("NSYNC_TORCH_TRACE") and not _CALIBRATE_DIR else None
)


def _record(source):
    torch = sys.modules.get("torch")
    if torch is None:
        return  # nsync.step() in a program that never imported torch: nsync says so (the window's "torch")

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


_timings_written: list = []  # once written (at exit, or by the window's thread), not again


class _Switch:
    """nsync measure's one-command mode (NSYNC_AB): which version of the program runs the step in progress,
    from the optimizer steps the window has seen end."""

    def __init__(self, block):
        self.block = block
        self.last_asked = None  # optimizer steps ended when the program last asked

    def fixed(self):
        done, warmup = _window.done, _window.warmup
        self.last_asked = done
        if done < warmup:
            return done % 2 == 1
        return ((done - warmup) // self.block) % 4 in (1, 2)


_switch = None  # set at the end when NSYNC_AB asks for it


def fixed():
    """What ``nsync.fixed()`` answers under ``nsync measure`` with one command (None: not in that mode)."""
    return None if _switch is None else _switch.fixed()


def _write_timings():
    timed = {k: v for k, v in _events.items() if len(v) >= 2}
    if not timed or _timings_written:
        return
    _timings_written.append(True)
    import torch

    torch.cuda.synchronize()
    intervals = {}
    for source, events in timed.items():  # no itertools.pairwise: the program's Python may be older than 3.10
        intervals[source] = [round(a.elapsed_time(b) * 1e6) for a, b in zip(events[:-1], events[1:])]  # noqa: RUF007
    path = os.path.join(_CALIBRATE_DIR, f"calibration-{os.getpid()}.json")
    # where the window began, per source: the intervals from that index on are the captured steps'
    began = {k: v for k, v in _window.began_at.items() if k in intervals}
    with open(path, "w") as handle:
        # nsync.capturing.calibrate.RUN_SCHEMA, written as a literal: this file must not import nsync
        timings = {"schema": "nsync.calibration-run/1", "intervals_ns": intervals, "window_from": began}
        if _switch is not None:
            timings["fixed_last_asked"] = _switch.last_asked
        json.dump(timings, handle)


_failed: set = set()


def _safely(what, fn, *args):
    try:
        return fn(*args)
    except Exception as err:  # never break the user's program; say so once
        if what not in _failed:
            _failed.add(what)
            print(f"nsync: could not {what} ({err})", file=sys.stderr)
        return None


# the capture window (_nsync_window, beside this file), driving this module's capture and timings
_window = _nsync_window.Window(
    os.environ.get("NSYNC_WINDOW"), os.environ.get("NSYNC_WINDOW_DIR"), site=sys.modules[__name__]
)


def _flush():
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed stream has nothing left to say
            stream.flush()


def _end_now():
    if _CALIBRATE_DIR:
        _safely("write the calibration timings", _write_timings)
    _flush()
    os._exit(0)


_hooks: list = []  # (before_step, after_step), made once: by the optimizer's import or by step()


def _step_hooks():
    """The step hooks (made on first use): the optimizer's, and those of :func:`step`."""
    if _hooks:
        return _hooks
    nvtx = None
    # never import torch here: a program that has not (nsync.step() first) would have torch's import install these
    # hooks again, inside this call
    if not _CALIBRATE_DIR and _kineto is None and "torch" in sys.modules:
        with contextlib.suppress(Exception):  # no CUDA build: nothing to mark
            import torch.version

            if torch.version.cuda:  # (a torch built without CUDA has NVTX functions that raise)
                from torch.cuda import nvtx

    def before_step(optimizer, args, kwargs):
        if _window.active:
            _safely("open the capture window", _window.before_step)
        # which optimizer steps: a loop of several a step (a GAN's two) is told apart from one of one
        which = _OPTIMIZER_MARK.format(_optimizer_number(optimizer))
        if nvtx is not None:
            nvtx.range_push(_MARK)
            nvtx.range_push(which)
        if _kineto is not None:
            _safely("mark an optimizer step", _kineto.mark_begin, which)

    def after_step(optimizer, args, kwargs):
        if nvtx is not None:
            nvtx.range_pop()
            nvtx.range_pop()
        if _kineto is not None:
            _safely("mark an optimizer step", _kineto.mark_end)
        if _CALIBRATE_DIR:
            _safely("time an optimizer step", _record, "marks")
        if _window.active and _safely("close the capture window", _window.after_step):
            _flush()
            raise SystemExit(0)

    if not _hooks:  # (made once, whoever asked first)
        _hooks.extend((before_step, after_step))
    return _hooks


def _optimizer_number(optimizer):
    """1, 2... in the order the optimizers first stepped (a new one is never taken for a collected one); 0 for
    what cannot be referred to weakly (nsync.step()'s None)."""
    try:
        number = _optimizers.get(optimizer)
        if number is None:
            number = _optimizers[optimizer] = next(_numbers)
        return number
    except TypeError:
        return 0


_numbers = itertools.count(1)  # (not the dictionary's length: it forgets collected optimizers)


def _install_step_hooks(optimizer_module):
    before_step, after_step = _step_hooks()
    optimizer_module.register_optimizer_step_pre_hook(before_step)
    optimizer_module.register_optimizer_step_post_hook(after_step)


def step():
    """What ``nsync.step()`` does in a loop without an optimizer (inference, serving): what an optimizer step's
    hooks do, at once, marking the end of the program's step (it may end the program, as those do)."""
    before_step, after_step = _step_hooks()
    before_step(None, (), {})
    after_step(None, (), {})


def _mark_data_waits(dataloader_module):
    """Each batch a DataLoader hands the program, in a range of its own (``nsync: data loader``): how long the
    host thread waited for its data, which the analysis tells apart from a slow host. Captures only."""
    if _CALIBRATE_DIR:
        return
    iterator = dataloader_module._BaseDataLoaderIter
    next_batch = iterator.__next__
    calls = []  # (begin, end), found at the first batch: torch may still be importing when this runs

    def __next__(self):
        if not calls:
            calls.append(_safely("mark the data loader", _range_calls) or (None, None))
        begin, end = calls[0]
        if begin is None:
            return next_batch(self)
        scope = begin(_DATA_MARK)
        try:
            return next_batch(self)
        finally:
            end(scope)

    iterator.__next__ = __next__


def _range_calls():
    """(begin(name) -> scope, end(scope)) of the capture's ranges: torch.profiler's or NVTX's; (None, None) where
    neither marks anything (a torch built without CUDA under nsys)."""
    if _kineto is not None:
        return (lambda name: _kineto.enter_range(name) if _kineto.profiling() else None), _kineto.exit_range
    with contextlib.suppress(Exception):
        import torch.version

        if torch.version.cuda:
            from torch.cuda import nvtx

            return (lambda name: nvtx.range_push(name)), (lambda scope: nvtx.range_pop())
    return None, None


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


def _opaque_to_compile(torch_module):
    """Under the switch: ``torch.compile`` must not trace into :func:`fixed`. Its answer changes as steps end (a
    traced one would be baked into the graph, or recompiled every step), and dynamo looks this module up by its
    name, "sitecustomize", which is the program's own: tracing it stopped the program (InternalTorchDynamoError
    on the H200, fixtures/h200/switched/README.md). Disabled, the call breaks the graph and runs as Python."""
    global fixed
    if importlib.util.find_spec("torch.compiler") is not None:  # (none before torch 2.1: nothing compiles)
        fixed = importlib.import_module("torch.compiler").disable(fixed)


def _profile_whole_run(torch_module):
    _kineto.start()
    atexit.register(_safely, "write the torch.profiler trace", _kineto.stop)


def _run_shadowed_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        sys.modules["sitecustomize"] = module
        spec.loader.exec_module(module)


_block = os.environ.get("NSYNC_AB", "")
if _block.isdigit() and int(_block) > 0 and _window.active:  # (the window counts the steps)
    _switch = _Switch(int(_block))
# nsync.fixed() and nsync.step() find this module here (as "sitecustomize" it is shadowed by the program's own)
sys.modules["_nsync_switch"] = sys.modules[__name__]
_installs = {"torch.optim.optimizer": _install_step_hooks, "torch.utils.data.dataloader": _mark_data_waits}
if _switch is not None:
    _installs["torch"] = _opaque_to_compile
if _CALIBRATE_DIR:
    _installs["torch.cuda.nvtx"] = _time_ranges
if _kineto is not None:
    _installs["torch.cuda.nvtx"] = _kineto.mirror_ranges
    if not _window.active:  # the whole run: from torch's import to the program's exit
        _installs["torch"] = _profile_whole_run
sys.meta_path.insert(0, _AfterImport(_installs))
_said_at = os.environ.get("NSYNC_WINDOW_DIR")
if _said_at:  # the program started under nsys: were nsys to fail now, nsync must not run the program again
    _safely("say the program started", _nsync_window.touch, os.path.join(_said_at, f"started-{os.getpid()}"))
if _window.active:
    atexit.register(_safely, "say what the capture window saw", _window.save)
    _excepthook = sys.excepthook

    def _uncaught(kind, value, traceback):
        """An exception that ends the program (its script's SyntaxError too): said in the window's state."""
        _window.uncaught = getattr(kind, "__name__", "an exception")
        _excepthook(kind, value, traceback)

    sys.excepthook = _uncaught
    # the clock's window only in the command's first Python process: never in one it starts (a worker, a helper)
    if os.environ.pop("NSYNC_WINDOW_ROOT", None):
        threading.Thread(target=_window.by_time, name="nsync-window", daemon=True).start()
    else:
        threading.Thread(target=_window.say_cuda, name="nsync-cuda", daemon=True).start()
_run_shadowed_sitecustomize()
