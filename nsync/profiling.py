"""``nsync profile``: capture a program under nsys, export, and analyse, as one public function."""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from nsync.analysis import Analysis, analyze
from nsync.calibration import Calibration, beside, pooled, write_calibration
from nsync.calibration_run import CalibrationRun, pinned, run_calibration
from nsync.config import AnalysisConfig
from nsync.errors import NsysError, UsageError
from nsync.nsys import (
    CaptureOptions,
    CaptureResult,
    Nsys,
    NsysFailedFirst,
    WindowNeverOpened,
    export_sqlite,
    find_nsys,
    run_capture,
)
from nsync.nsys.window import is_python
from nsync.settings import setting

Say = Callable[[str], None]


@dataclass(frozen=True)
class ProfileResult:
    analysis: Analysis
    sqlite: Path
    report: Path | None
    exit_code: int  # the program's own exit code
    interrupted: bool
    calibration: Calibration | None = None


def build_command(target: Sequence[str], module: str | None, python: str | None = None) -> list[str]:
    """The argv to profile: ``python SCRIPT ARGS``, ``python -m MODULE ARGS``, or any command as given."""
    interpreter = python or os.environ.get("NSYNC_PYTHON") or shutil.which("python3") or sys.executable
    if module:
        return [interpreter, "-m", module, *target]
    if not target:
        raise UsageError("nothing to profile: give SCRIPT [ARGS]..., -m MODULE [ARGS]... or -- COMMAND [ARGS]...")
    first = target[0]
    if first.endswith(".py"):
        if not Path(first).is_file():
            raise UsageError(f"script not found: {first}")
        return [interpreter, *target]
    if not (Path(first).is_file() or shutil.which(first)):
        raise UsageError(f"command not found: {first}")
    return list(target)


def output_name(target: Sequence[str], module: str | None) -> str:
    """Base name of the outputs: the module, script or command name."""
    if module:
        return module.rsplit(".", 1)[-1]
    if not target:
        return "nsync"
    return next((Path(arg).stem for arg in target if arg.endswith(".py")), Path(target[0]).name)


def prepare_output(out_dir: Path) -> None:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"cannot create output folder {out_dir}: {err.strerror}") from err
    if not os.access(out_dir, os.W_OK | os.X_OK):
        raise UsageError(f"output folder is not writable: {out_dir}")


def _capture(nsys: Nsys, command: Sequence[str], options: CaptureOptions, tell: Say) -> CaptureResult:
    """run_capture, once more where nsys failed before the program started (nothing of the program ran)."""
    try:
        return run_capture(nsys, command, options, tell)
    except NsysFailedFirst as failed:
        tell(f"{failed}: trying once more")
    try:
        return run_capture(nsys, command, options, tell)
    except NsysFailedFirst as again:
        raise NsysError(f"{again}, twice: run again, or see whether another nsys holds the machine") from None


def profile(
    command: Sequence[str],
    options: CaptureOptions,
    config: AnalysisConfig | None = None,
    nsys_path: str | None = None,
    say: Say | None = None,
    progress: Callable[[str], None] | None = None,
    calibrate: bool = True,
    cpus: frozenset[int] | None = None,
    calibration_runs: int = 1,
) -> ProfileResult:
    """Capture ``command`` under nsys, export the report to SQLite and analyse it. With ``calibrate``, the
    program is first run without the profiler to time its steps (nsync.calibration), ``calibration_runs`` times
    (their steps pooled: one run on a slow moment of the host then counts for its share). ``cpus``: the CPUs
    both runs are pinned to (the same host speed for both; fixtures/h200/README.md measures what it buys).
    ``options.window``: capture only those steps (nsync.nsys.window), in both runs; the whole run when the
    command is no Python program, or the calibration run shows the program ends before the window does.

    ``say``: called with each message for the user; ``progress``: with each analysis stage's name. Returns
    a :class:`ProfileResult`: the SQLite, the report, the :class:`Analysis`, the program's exit code (returned,
    not raised: what was captured is analysed either way) and whether it was interrupted. Raises NsysError
    (nsys missing, failed, or hung with nothing saved), UsageError (a command or option that cannot run),
    WindowNeverOpened (the program ended before its capture window, and too late to capture it whole).

        >>> options = nsync.CaptureOptions(out_dir=Path("out"), name="train", window=nsync.CaptureWindow())
        >>> result = nsync.profile(["python3", "train.py"], options, say=print)
        >>> nsync.write(result.analysis, "out/train.html")
    """
    tell = say or (lambda _m: None)
    nsys = find_nsys(nsys_path)
    prepare_output(options.out_dir)
    options = _windowed(options, command, tell)
    if cpus:
        tell(f"running the program on CPUs {', '.join(map(str, sorted(cpus)))}")
    with pinned(cpus):
        calibration = None
        target = beside(options.base.with_suffix(".sqlite"))
        target.unlink(missing_ok=True)  # a calibration left from an earlier capture must not pass for this one's
        if calibrate:
            tell(
                "calibration run: the program once without the profiler, to time its own steps "
                f"({setting('profile(calibrate=False)')} skips it)"
            )
            run = run_calibration(command, target, tell, options.window)
            if run is not None:
                options = _after_calibration(options, run, tell)
                more = _more_runs(run.calibration, calibration_runs, command, options, target, tell)
                calibration = _kept(more, target, tell)
        tell(f"capturing with nsys {nsys.version_str} ({nsys.path})")
        began = time.monotonic()
        try:
            captured = _capture(nsys, command, options, tell)
        except WindowNeverOpened as never:
            took_s = time.monotonic() - began
            assert options.window is not None
            if took_s > options.window.rerun_whole_s:
                raise
            tell(
                f"the program ended after {never.seen.optimizer_steps} optimizer step(s) in {took_s:.1f} s, before "
                "its capture window opened: capturing its whole run instead"
            )
            captured = run_capture(nsys, command, replace(options, window=None), tell)
        assert captured.report is not None
    seen = captured.window
    if seen is not None and options.window is not None and seen.opened_by == "time":
        tell(
            f"note: the program made no optimizer step within {options.window.wait_s:g} s of using CUDA: captured "
            f"{options.window.seconds:g} s of it by the clock, with steps found in the trace itself"
        )
    if seen is not None and seen.ended_program:
        tell(
            "the program was ended after the capture window "
            f"({setting('CaptureWindow(run_to_end=True)')} lets it finish)"
        )
    elif seen is not None and options.window is not None and seen.opened_by == "steps" and not seen.closed:
        tell(
            f"the program ended after {seen.optimizer_steps} optimizer steps, inside the window: captured steps "
            f"{options.window.warmup_steps + 1}-{seen.optimizer_steps}"
        )
    tell(f"exporting {captured.report.name} to SQLite")
    sqlite = export_sqlite(nsys, captured.report, tell)
    report: Path | None = captured.report
    if not options.keep_report:
        captured.report.unlink()
        report = None
    tell("analysing")
    analysis = analyze(sqlite, config, progress=progress, calibration=calibration)
    return ProfileResult(
        analysis=analysis,
        sqlite=sqlite,
        report=report,
        exit_code=captured.exit_code,
        interrupted=captured.interrupted,
        calibration=calibration,
    )


def _windowed(options: CaptureOptions, command: Sequence[str], tell: Say) -> CaptureOptions:
    """``options`` as they can be kept: a window needs the injected sitecustomize in a Python program."""
    window = options.window
    if window is None:
        return options
    if not options.step_marks:
        tell(
            f"note: without step marks ({setting('profile(step_marks=False)')}) there is no window: capturing the "
            "whole run"
        )
    elif not is_python(list(command)):
        tell(f"note: {command[0]} is not a Python program, so there is no window of steps: capturing its whole run")
    else:
        tell(window.describe())
        return options
    return replace(options, window=None)


def _after_calibration(options: CaptureOptions, run: CalibrationRun, tell: Say) -> CaptureOptions:
    """The capture as the calibration run shows it can be: the whole run of a program that ends before its
    window does; and how long it should take."""
    window, seen = options.window, run.window
    if window is not None and seen is not None and not seen.complete(window):
        tell(
            f"the program ended on its own after {seen.optimizer_steps} optimizer step(s) in {run.wall_s:.1f} s, "
            f"before the window's {window.warmup_steps + window.steps}: capturing its whole run"
        )
        return replace(options, window=None)
    ended = " (ended after the window)" if seen is not None and seen.ended_program else ""
    tell(
        f"calibration run: {run.wall_s:.1f} s{ended}; the capture should take about {1.1 * run.wall_s + 3:.0f}-"
        f"{2.2 * run.wall_s + 10:.0f} s (nsys slows a program 1.1-2.2x), then its export"
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
        run = run_calibration(command, target, tell, options.window)
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
