"""The calibration runs before a capture: the program without the profiler, as many times as asked, its
steps timed and pooled, and the capture as those runs show it can be made."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from nsync.calibration import Calibration, beside, pooled, write_calibration
from nsync.calibration_run import CalibrationRun, run_calibration
from nsync.errors import NoCudaUsed, ProgramFailed
from nsync.nsys import CaptureOptions
from nsync.nsys.window import CaptureWindow, no_cuda_said, no_torch_said
from nsync.profiling.options import ProfileOptions, label_run, program_fd
from nsync.settings import setting
from nsync.words import counted

Say = Callable[[str], None]
# the fewest steps after the warm-up that a capture from there holds (the analysis leaves out its first)
MIN_WINDOW_STEPS = 5


def calibrated(
    command: Sequence[str], capture: CaptureOptions, options: ProfileOptions, tell: Say, whole_if_short: bool = True
) -> tuple[CaptureOptions, Calibration | None]:
    """The calibration runs (where asked), and the capture as they show it can be made (``whole_if_short``: a
    program that ends inside its window captured whole, else from its warm-up's end, where it makes enough
    steps)."""
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
    _stop_where_nothing_runs(run, capture.window)
    capture = _after_calibration(capture, run, tell, whole_if_short)
    more = _more_runs(run.calibration, options.calibration_runs, command, capture, target, tell)
    return capture, _kept(more, target, tell)


def _stop_where_nothing_runs(run: CalibrationRun, window: CaptureWindow | None) -> None:
    """Stop before the capture where it would run for nothing: a program that used no CUDA (it would run
    unbounded again), or one that failed before its first step (it would fail again, under nsys)."""
    if run.failed_at_once:
        raise ProgramFailed(
            f"the program ended on {run.failed_at_once} in its calibration run, before its first step (exit code "
            f"{run.exit_code}): nothing to capture (its own output says why)",
            run.exit_code,
        )
    if window is not None and run.window is not None and run.nothing_on_a_gpu:
        which = "its calibration run"
        raise NoCudaUsed(no_cuda_said(window, which) if run.window.no_cuda else no_torch_said(which))


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
