"""``nsync profile``: capture a program under nsys (or torch.profiler), export, and analyse, as one public
function; and, after a "measure it" verdict, the commands that settle it."""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from nsync.analysis import analyze
from nsync.capturing.calibrate import calibrated, pinned
from nsync.capturing.nsys import CaptureOptions, CaptureResult, NsysFailedFirst, run_capture
from nsync.capturing.options import ProfileOptions, ProfileResult, label_run
from nsync.capturing.run import build_command
from nsync.capturing.torch_profiler import run_torch_capture
from nsync.capturing.window import CaptureWindow, WindowNeverOpened, WindowOutcome, is_python
from nsync.errors import NsysError, UsageError
from nsync.load.calibration import Calibration
from nsync.load.nsys.export import export_sqlite
from nsync.load.nsys.locate import Nsys, find_nsys
from nsync.render.options import RenderOptions
from nsync.render.patch import SWITCH, render_switch
from nsync.settings import setting
from nsync.words import counted

Say = Callable[[str], None]


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
        tell(f"{failed.failed}: trying once more")
    try:
        return run_capture(nsys, command, options, tell)
    except NsysFailedFirst as again:
        raise NsysError(f"{again.failed} (tried twice){again.advice or ': run again'}") from None


def profile(
    target: Sequence[str],
    options: ProfileOptions | None = None,
    say: Say | None = None,
    progress: Say | None = None,
    before: Callable[[], None] | None = None,
) -> ProfileResult:
    """Capture the program ``target`` (``SCRIPT ARGS``, the arguments of ``options.module``, or any command) under
    nsys, export the report to SQLite and analyse it. With ``options.calibrate``, the program is first run without
    the profiler to time its steps (nsync.load.calibration), ``options.calibration_runs`` times (their steps pooled: one
    run on a slow moment of the host then counts for its share). The window of steps (ProfileOptions) is captured
    in both runs; the whole run where the command is no Python program, or the calibration run shows the program
    ends before the window does.

    ``say``: called with each message for the user; ``progress``: with each analysis stage's name; ``before``:
    once the output folder exists, before the program first runs (the command line checks its files there).
    Returns a :class:`ProfileResult`: the SQLite, the report, the :class:`nsync.Analysis`, the program's exit code
    (returned, not raised: what was captured is analysed either way) and whether it was interrupted. Raises
    NsysError (nsys missing, failed, or hung with nothing saved), UsageError (a command or option that cannot
    run), WindowNeverOpened (the program ended before its capture window, and too late to capture it whole).

        >>> result = nsync.profile(["train.py", "--epochs", "1"], nsync.ProfileOptions(steps=100), say=print)
        >>> nsync.write(result.analysis, "nsync-out/train.html")
    """
    options = options or ProfileOptions()
    tell = say or (lambda _m: None)
    command = build_command(target, options.module, options.python)
    prepare_output(options.out_dir)
    if before is not None:
        before()
    nsys = _nsys_backend(options, tell)
    capture = _windowed(options.capture(target), command, tell)
    if options.cpus:
        tell(f"running the program on CPUs {', '.join(map(str, sorted(options.cpus)))}")
    with pinned(options.cpus):
        capture, calibration = calibrated(command, capture, options, tell, under_nsys=nsys is not None)
        if nsys is None:
            return _profiled_with_torch(command, capture, options, calibration, (tell, progress))
        label_run(options, "the capture (under nsys)")
        tell(f"capturing with nsys {nsys.version_str} ({nsys.path})")
        captured = _whole_if_early(lambda c: _capture(nsys, command, c, tell), capture, tell)
    _said_window(captured.window, capture.window, tell)
    assert captured.report is not None
    tell(f"exporting {captured.report.name} to SQLite")
    sqlite = export_sqlite(nsys, captured.report, tell)
    report: Path | None = captured.report
    if not capture.keep_report:
        captured.report.unlink()
        report = None
    tell("analysing")
    analysis = analyze(sqlite, options.config, progress=progress, calibration=calibration)
    return ProfileResult(analysis, sqlite, report, captured.exit_code, captured.interrupted, calibration)


def _nsys_backend(options: ProfileOptions, tell: Say) -> Nsys | None:
    """The nsys to capture with; None: capture with torch.profiler (``auto`` says why)."""
    if options.backend == "torch":
        return None
    if options.backend == "nsys":
        return find_nsys(options.nsys_path)
    try:
        nsys = find_nsys(options.nsys_path)
    except NsysError as err:
        tell(f"note: {err}: capturing with torch.profiler instead")
        return None
    if not nsys.records_python_frames:
        tell(f"note: nsys {nsys.version_str} records no Python backtraces (2025.1 does): capturing with torch.profiler")
        return None
    return nsys


def _profiled_with_torch(
    command: Sequence[str],
    capture: CaptureOptions,
    options: ProfileOptions,
    calibration: Calibration | None,
    says: tuple[Say, Say | None],
) -> ProfileResult:
    """The capture under torch.profiler (nsync.capturing.torch_profiler) and its analysis."""
    tell, progress = says
    label_run(options, "the capture (under torch.profiler)")
    tell("capturing with torch.profiler (CPU and CUDA activity, Python frames)")
    captured = _whole_if_early(lambda c: run_torch_capture(command, c, tell), capture, tell)
    _said_window(captured.window, capture.window, tell)
    tell("analysing")
    analysis = analyze(captured.trace, options.config, progress=progress, calibration=calibration)
    return ProfileResult(analysis, captured.trace, None, captured.exit_code, captured.interrupted, calibration)


Captured = TypeVar("Captured")


def _whole_if_early(capture_with: Callable[[CaptureOptions], Captured], capture: CaptureOptions, tell: Say) -> Captured:
    """The capture; a program that ended before its window opened, soon enough, captured again whole."""
    began = time.monotonic()
    try:
        return capture_with(capture)
    except WindowNeverOpened as never:
        took_s = time.monotonic() - began
        assert capture.window is not None
        if took_s > capture.window.rerun_whole_s:
            raise
        tell(
            f"the program ended after {counted(never.seen.optimizer_steps, 'optimizer step')} in {took_s:.1f} s, "
            "before its capture window opened: capturing its whole run instead"
        )
        return capture_with(replace(capture, window=None))


def _said_window(seen: WindowOutcome | None, window: CaptureWindow | None, tell: Say) -> None:
    """What the capture window did, where it did not do what was asked."""
    if seen is None or window is None:
        if seen is not None and seen.ended_program:
            tell(_ended())
        return
    if seen.opened_by == "time":
        tell(
            f"note: the program made no optimizer step within {window.wait_s:g} s of using CUDA: captured "
            f"{window.seconds:g} s of it by the clock, with steps found in the trace itself"
        )
    if seen.ended_program:
        tell(_ended())
    elif seen.opened_by == "steps" and not seen.closed:
        tell(
            f"the program ended after {seen.optimizer_steps} optimizer steps, inside the window: captured steps "
            f"{window.warmup_steps + 1}-{seen.optimizer_steps}"
        )


def _ended() -> str:
    return (
        f"the program was ended after the capture window ({setting('ProfileOptions.run_to_end=True')} lets it finish)"
    )


def _windowed(options: CaptureOptions, command: Sequence[str], tell: Say) -> CaptureOptions:
    """``options`` as they can be kept: a window needs the injected sitecustomize in a Python program."""
    window = options.window
    if window is None:
        return options
    if not options.step_marks:
        tell(
            f"note: without step marks ({setting('ProfileOptions.step_marks=False')}) there is no window: capturing "
            "the whole run"
        )
    elif not is_python(list(command)):
        tell(f"note: {command[0]} is not a Python program, so there is no window of steps: capturing its whole run")
    else:
        tell(window.describe())
        return options
    return replace(options, window=None)


def to_settle(
    result: ProfileResult,
    target: Sequence[str],
    options: ProfileOptions,
    switch: Path | None = None,
    source_dirs: Sequence[Path] = (),
) -> str:
    """After a "measure it" verdict: the commands that settle it, with the program's own command line (``switch``:
    where the switched patch was asked for); the switched patch where it would hold a switch (the patch renderer
    tells: the files found, their lines fit)."""
    words = ["-m", options.module, *target] if options.module else list(target)
    python = f"--python {shlex.quote(options.python)} " if options.python else ""
    measure = "nsync measure " + python + shlex.quote(shlex.join(words))
    # a loop without optimizer steps (its steps found otherwise): the measure switches on its nsync.step() calls
    if result.analysis.steps.source != "marks":
        measure += "; it has no optimizer step: end each of its steps with nsync.step()"
    if SWITCH not in render_switch(result.analysis, RenderOptions(source_dirs=tuple(source_dirs))):
        return f"to settle it, put the fix behind `if nsync.fixed():` in the program, then: {measure}"
    if switch is None:
        analyze_it = f"nsync analyze {shlex.quote(str(result.sqlite))} --suggest-switch both.patch"
        return f"to settle it: {analyze_it} && git apply both.patch && {measure}"
    return f"to settle it: git apply {shlex.quote(str(switch))} && {measure}"
