"""The calibration: the program without the profiler, its steps timed by nsync's sitecustomize
(nsync/capturing/inject) in its calibration mode (:func:`timed_run`, which ``nsync measure`` runs too); and before a
capture, as many such runs as asked, pooled into the :class:`nsync.load.calibration.Calibration` the analysis reads
(:func:`calibrated`), and the capture as those runs show it can be made."""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from nsync.capturing.nsys import CaptureOptions
from nsync.capturing.options import ProfileOptions, label_run, program_fd
from nsync.capturing.run import Injection, Mode, start_program
from nsync.capturing.window import (
    CaptureWindow,
    WindowOutcome,
    cpu_steps_said,
    no_cuda_said,
    no_torch_said,
    outcome,
)
from nsync.errors import NoCudaUsed, ProgramFailed
from nsync.load.calibration import Calibration, beside, intervals_of, pooled, write_calibration
from nsync.settings import setting
from nsync.words import counted

RUN_SCHEMA = "nsync.calibration-run/1"  # what the sitecustomize writes (one file per process)
Say = Callable[[str], None]
# the fewest steps after the warm-up that a capture from there holds (the analysis leaves out its first)
MIN_WINDOW_STEPS = 5


@dataclass(frozen=True)
class CalibrationRun:
    """What the calibration run gave: its timings (None: it timed no steps) and what its window saw."""

    calibration: Calibration | None
    window: WindowOutcome | None
    exit_code: int
    wall_s: float
    fixed_last_asked: int | None = None  # (nsync measure, one command) optimizer steps ended when the program
    # last asked nsync.fixed(); None: it never asked

    @property
    def failed(self) -> bool:
        """It exited with an error of its own (not ended by nsync after its window)."""
        return self.exit_code != 0 and not (self.window is not None and self.window.ended_program)

    @property
    def failed_at_once(self) -> str | None:
        """How it ended with an error before its first step (no optimizer step, no window by the clock, nothing
        timed): "on SyntaxError" (an exception), "with exit code 3" (``sys.exit(3)``); None where it did not."""
        seen = self.window
        if not self.failed or seen is None or self.calibration is not None or seen.optimizer_steps or seen.opened_by:
            return None
        return f"on {seen.uncaught}" if seen.uncaught else f"with exit code {self.exit_code}"

    @property
    def nothing_on_a_gpu(self) -> bool:
        """nsync ended it for using no CUDA within its window's wait, or its window opened (nsync.step()) in a
        program that never imported torch."""
        seen = self.window
        return seen is not None and (seen.no_cuda or (seen.opened_by is not None and not seen.torch))


def run_calibration(
    command: Sequence[str], target: Path, say: Say, window: CaptureWindow | None = None, stdout: int | None = None
) -> CalibrationRun | None:
    """Run ``command`` without the profiler, timing its steps; with ``window``, ended after it as the capture
    will be. The program's output goes where it would (``stdout``: a file descriptor instead); None (and a
    note) when it could not start. The timings are not written: :func:`write_calibration` does that for what
    the capture will hold."""
    try:
        run = timed_run(command, window, stdout)
    except OSError as err:
        say(f"note: calibration run could not start ({err.strerror}): predictions will be uncalibrated")
        return None
    if run.failed_at_once or run.nothing_on_a_gpu:
        return run  # (nsync.profile stops, saying why)
    if run.failed:
        say(f"note: the calibration run exited with code {run.exit_code}")
    if run.calibration is None:
        say(
            "note: the calibration run timed no steps (no optimizer step or NVTX range on a CUDA stream): "
            "predictions will be uncalibrated"
        )
        return run
    return replace(run, calibration=replace(run.calibration, path=target))


def timed_run(
    command: Sequence[str],
    window: CaptureWindow | None = None,
    stdout: int | None = None,
    switch_block: int | None = None,
) -> CalibrationRun:
    """One run of ``command`` without the profiler, its steps timed by the sitecustomize (with ``window``:
    ended after it); its calibration is None when it timed no steps. ``stdout``: where the program's output
    goes (a file descriptor; default: where nsync's goes); ``switch_block``: ``nsync.fixed()`` alternates the
    program's versions in blocks of this many optimizer steps. Raises OSError when it cannot start."""
    with tempfile.TemporaryDirectory(prefix="nsync-calibrate-") as scratch:
        mode: Mode = "calibrate" if switch_block is None else "switch"
        env = Injection(mode, Path(scratch), window, ending=True, block_steps=switch_block).env()
        began = time.monotonic()
        code = start_program(command, env, stdout).wait()
        wall_s = time.monotonic() - began
        runs = [_read_run(path) for path in sorted(Path(scratch).glob("calibration-*.json"))]
        seen = outcome(Path(scratch)) if window is not None else None
    asked = max((run[2] for run in runs if run[2] is not None), default=None)
    timed = [run for run in runs if run[0]]
    if not timed:
        return CalibrationRun(None, seen, code, wall_s, asked)
    # the process that timed most steps is the training one (not a data-loader worker)
    intervals, window_from, _ = max(timed, key=lambda run: max(len(v) for v in run[0].values()))
    calibration = Calibration(None, intervals, tuple(command), code, wall_s, window_from)
    return CalibrationRun(calibration, seen, code, wall_s, asked)


def _read_run(path: Path) -> tuple[dict[str, np.ndarray], dict[str, int], int | None]:
    """One process's timings, where its window began in each (empty when unreadable), and the optimizer steps
    ended when it last asked ``nsync.fixed()`` (None: never)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}, {}, None
    if not isinstance(data, dict) or data.get("schema") != RUN_SCHEMA:
        return {}, {}, None
    began = data.get("window_from")
    window_from = (
        {k: v for k, v in began.items() if isinstance(k, str) and isinstance(v, int) and v >= 0}
        if isinstance(began, dict)
        else {}
    )
    asked = data.get("fixed_last_asked")
    return intervals_of(data.get("intervals_ns"), path), window_from, asked if isinstance(asked, int) else None


@contextmanager
def pinned(cpus: frozenset[int] | None) -> Iterator[None]:
    """This process (and what it starts meanwhile) on ``cpus`` only; as before afterwards."""
    if not cpus:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def calibrated(
    command: Sequence[str], capture: CaptureOptions, options: ProfileOptions, tell: Say, under_nsys: bool = True
) -> tuple[CaptureOptions, Calibration | None]:
    """The calibration runs (where asked), and the capture as they show it can be made. ``under_nsys``: the
    capture is nsys's, which needs CUDA, and captures a program that ends inside its window whole (torch.profiler
    captures it from its warm-up's end, where it makes enough steps)."""
    target = beside(capture.base.with_suffix(".sqlite"))
    target.unlink(missing_ok=True)  # a calibration left from an earlier capture must not pass for this one's
    if not options.calibrate:
        return capture, None
    tell(
        "calibration run: the program once without the profiler, to time its own steps "
        f"({setting('ProfileOptions.calibrate=False')} skips it)"
    )
    label_run(options, "the calibration run (without the profiler)")
    run = run_calibration(command, target, tell, capture.window, program_fd(options.program_output))
    if run is None:
        return capture, None
    _stop_where_nothing_runs(run, capture.window, needs_cuda=under_nsys)
    capture = _after_calibration(capture, run, tell, whole_if_short=under_nsys)
    more = _more_runs(run.calibration, options.calibration_runs, command, capture, target, tell)
    return capture, _kept(more, target, tell)


def _stop_where_nothing_runs(run: CalibrationRun, window: CaptureWindow | None, needs_cuda: bool) -> None:
    """Stop before the capture where it would run for nothing: a program that used no CUDA (it would run
    unbounded again; ``needs_cuda``, under nsys: one whose steps ran on the CPU), or one that failed before its
    first step (it would fail again, under nsys)."""
    if run.failed_at_once:
        code = f" (exit code {run.exit_code})" if run.window is not None and run.window.uncaught else ""
        raise ProgramFailed(
            f"the program ended {run.failed_at_once} in its calibration run, before its first step{code}: nothing "
            "to capture (its own output says why)",
            run.exit_code,
        )
    if window is not None and run.window is not None and run.nothing_on_a_gpu:
        which = "its calibration run"
        raise NoCudaUsed(no_cuda_said(window, which) if run.window.no_cuda else no_torch_said(which))
    seen = run.window
    if needs_cuda and seen is not None and seen.opened_by is not None and seen.torch and not seen.cuda:
        raise NoCudaUsed(cpu_steps_said(seen, "its calibration run"))


def _after_calibration(options: CaptureOptions, run: CalibrationRun, tell: Say, whole_if_short: bool) -> CaptureOptions:
    """The capture as the calibration run shows it can be: the whole run of a program that ends before its
    window does (unless ``whole_if_short`` is off and it makes MIN_WINDOW_STEPS after its warm-up: then those
    steps); and how long it should take."""
    window, seen = options.window, run.window
    if window is not None and seen is not None and not seen.complete(window):
        ended = (
            f"the program ended on its own after {counted(seen.optimizer_steps, 'optimizer step')} in "
            f"{run.wall_s:.1f} s, before the window's {window.warmup_steps + window.steps}: "
        )
        if whole_if_short or seen.optimizer_steps < window.warmup_steps + MIN_WINDOW_STEPS:
            tell(ended + "capturing its whole run")
            return replace(options, window=None)
        tell(
            ended + f"capturing its steps {window.warmup_steps + 1}-{seen.optimizer_steps} (its whole run under "
            "torch.profiler would hold every Python call of its start-up)"
        )
        return options
    ended = " (ended after the window)" if seen is not None and seen.ended_program else ""
    tell(
        f"calibration run: {run.wall_s:.1f} s{ended}; the capture should take about {1.1 * run.wall_s + 3:.0f}-"
        f"{2.2 * run.wall_s + 10:.0f} s (a profiler slows a program 1.1-2.2x), then its export"
    )
    return options


def _more_runs(
    first: Calibration | None, runs: int, command: Sequence[str], options: CaptureOptions, target: Path, tell: Say
) -> Calibration | None:
    """The first calibration run's timings of the steps the capture will hold, pooled with ``runs - 1`` more
    runs' (each run as the first ran: the same window)."""

    def held(calibration: Calibration) -> Calibration:
        return calibration.of_window() if options.window is not None else calibration

    if first is None:
        return None
    timings = [held(first)]
    for k in range(2, runs + 1):
        tell(f"calibration run {k} of {runs}")
        run = run_calibration(command, target, tell, options.window, program_fd(options.program_output))
        if run is None or run.calibration is None:
            break
        timings.append(held(run.calibration))
    return pooled(timings) if len(timings) > 1 else timings[0]


def _kept(calibration: Calibration | None, target: Path, tell: Say) -> Calibration | None:
    """The timings of the steps the capture will hold, written to ``target``."""
    if calibration is None:
        return None
    write_calibration(calibration, target)
    timed = ", ".join(f"{k} ({len(v) + calibration.runs} times)" for k, v in calibration.intervals_ns.items())
    medians = "; ".join(
        f"{k}: " + ", ".join(f"{m / 1e6:.3f}" for m in v) + " ms" for k, v in calibration.run_medians_ns.items()
    )
    runs = f" in {calibration.runs} runs (median steps {medians})" if calibration.runs > 1 else ""
    tell(f"calibration: timed {timed}{runs}; wrote {target}")
    return calibration
