"""Imported by nsync's sitecustomize: the capture window's state in the profiled program's process.

The capture window (``NSYNC_WINDOW=W:K``): the sitecustomize's step hooks count optimizer steps. At optimizer
step W an NVTX start/end range ``nsync-window`` begins (nsys, run with ``--capture-range=nvtx``, starts
capturing there), and once step W+K has ended it ends (nsys stops), so the capture holds the K steps W+1..W+K. Then the
program is ended, as ``sys.exit(0)`` from that step would end it (``NSYNC_WINDOW_END=run`` lets it run on).
A program (the command's first Python process, ``NSYNC_WINDOW_ROOT``) with no optimizer step within
``NSYNC_WINDOW_WAIT_S`` seconds of its start of CUDA gets a window of ``NSYNC_WINDOW_SECONDS`` seconds
instead, opened and closed by a thread, after which it is sent SIGTERM, as nsys's own ``--duration`` ends a
program. A program none of whose processes has used CUDA ``NSYNC_WINDOW_WAIT_S`` seconds after its start is
ended the same way, saying so (``no_cuda``): a program on the CPU, or not a GPU program at all, is never run
unbounded. Each process says what happened in ``NSYNC_WINDOW_DIR/window-<pid>.json`` (and ``cuda-<pid>``
once it uses CUDA).

Like the sitecustomize, this module imports nothing of nsync's and raises nothing into the program: its
calls come through the sitecustomize's ``_safely`` or run in a thread of their own.
"""

import atexit
import json
import os
import signal
import sys
import threading
import time


def touch(path):
    open(path, "w").close()


class Window:
    """The capture window's state in this process (see the module docstring)."""

    def __init__(self, spec, folder, site):
        warmup, _, steps = (spec or "").partition(":")
        self.active = bool(spec and folder)
        self.warmup = max(1, int(warmup or 1)) if self.active else 0
        self.steps = int(steps or 0) if self.active else 0
        self.folder = folder
        self.site = site  # the sitecustomize module: its capture, timings and error handling
        self.run_on = os.environ.get("NSYNC_WINDOW_END") == "run"
        self.wait_s = float(os.environ.get("NSYNC_WINDOW_WAIT_S") or 60)
        self.seconds = float(os.environ.get("NSYNC_WINDOW_SECONDS") or 20)
        self.done = 0  # optimizer steps ended
        self.opened = None  # "steps" or "time"
        self.closed = False
        self.ending = False  # the program was asked to end
        self.no_cuda = False  # ended for using no CUDA in any process within wait_s of its start
        self.uncaught = None  # the exception that ended the program, by name (a SyntaxError, an ImportError...)
        self.range_id = None
        self.began_at = {}  # calibration source -> events recorded before the window began
        self.lock = threading.Lock()

    def state(self):
        return {
            "schema": "nsync.window/1",
            "optimizer_steps": self.done,
            "warmup_steps": self.warmup,
            "steps": self.steps,
            "opened_by": self.opened,
            "closed": self.closed,
            "ended_program": self.ending,
            "no_cuda": self.no_cuda,
            "torch": "torch" in sys.modules,
            "cuda": self.cuda_here(),
            "uncaught": self.uncaught,
        }

    def save(self):
        if self.active:
            path = os.path.join(self.folder, f"window-{os.getpid()}.json")
            with open(path, "w") as handle:
                json.dump(self.state(), handle)

    def open(self, how):
        """Begin the window (under the lock)."""
        self.opened = how
        site = self.site
        self.began_at = {source: len(events) for source, events in site._events.items()}
        if not site._CALIBRATE_DIR and "torch" in sys.modules:  # (without torch: nothing to capture, nsync says so)
            if site._kineto is not None:
                site._safely("start torch.profiler", site._kineto.start)
                atexit.register(site._safely, "write the torch.profiler trace", site._kineto.stop)
            elif self.cuda_here():  # (a program on the CPU has no GPU work to capture: nsync says so)
                from torch.cuda import nvtx

                self.range_id = nvtx.range_start(site._WINDOW_RANGE)
        self.save()

    def close(self):
        """End the window (under the lock); whether the program is to be ended now."""
        if self.range_id is not None:
            from torch.cuda import nvtx

            nvtx.range_end(self.range_id)
        if self.site._kineto is not None:
            self.site._safely("write the torch.profiler trace", self.site._kineto.stop)
        self.closed = True
        self.ending = not self.run_on
        self.save()
        return self.ending

    def before_step(self):
        with self.lock:
            if self.ending:  # the program caught the SystemExit and went on: end it now
                self.site._end_now()
            if self.active and self.opened is None and self.done + 1 == self.warmup:
                self.open("steps")

    def after_step(self):
        """Whether the program is to be ended (after this step's own hooks ran)."""
        with self.lock:
            self.done += 1
            if self.opened == "steps" and not self.closed and self.done >= self.warmup + self.steps:
                return self.close()
        return False

    def cuda_here(self):
        """Whether this process has used CUDA (torch's) by now."""
        is_initialized = getattr(sys.modules.get("torch.cuda"), "is_initialized", None)
        return bool(is_initialized is not None and self.site._safely("see CUDA", is_initialized))

    def uses_cuda(self):
        """Whether any process of the program has used CUDA (torch's): this one, or one that said so."""
        # (torch.cuda may be in sys.modules half imported, without is_initialized yet)
        if self.cuda_here():
            return True
        names = self.site._safely("list the window folder", os.listdir, self.folder) or ()
        return any(name.startswith("cuda-") for name in names)

    def say_cuda(self):
        """A thread of every process but the first: say once that it uses CUDA (the first one looks)."""
        while not self.closed:
            time.sleep(0.25)
            is_initialized = getattr(sys.modules.get("torch.cuda"), "is_initialized", None)
            if is_initialized is not None and self.site._safely("see CUDA", is_initialized):
                path = os.path.join(self.folder, f"cuda-{os.getpid()}")
                self.site._safely("say CUDA is used", touch, path)
                return

    def by_time(self):
        """A thread: with no optimizer step ``wait_s`` after the program began to use CUDA (torch's), a window
        of ``seconds`` by the clock; then SIGTERM, as nsys's own --duration ends a program. A program that has
        used no CUDA ``wait_s`` after its start is ended the same way, saying so."""
        started, began = time.monotonic(), None
        while not (self.done or self.opened):
            time.sleep(0.25)
            if began is None and self.uses_cuda():
                began = time.monotonic()
            if began is None and time.monotonic() - started >= self.wait_s:
                with self.lock:
                    if self.done or self.opened:
                        return
                    self.no_cuda = self.ending = True
                    self.save()
                self.site._flush()
                os.kill(os.getpid(), signal.SIGTERM)
                return
            if began is not None and time.monotonic() - began >= self.wait_s:
                break
        with self.lock:
            if self.done or self.opened:
                return
            self.open("time")
        time.sleep(self.seconds)
        with self.lock:
            ending = self.close()
        if self.site._CALIBRATE_DIR:
            self.site._safely("write the calibration timings", self.site._write_timings)
        if ending:
            self.site._flush()
            os.kill(os.getpid(), signal.SIGTERM)
