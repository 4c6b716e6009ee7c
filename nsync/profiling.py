"""``nsync profile``: capture a program under nsys (or torch.profiler), export, and analyse, as one public
function."""

from __future__ import annotations

import os
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

from nsync.analysis import analyze
from nsync.calibration import Calibration, beside, pooled, write_calibration
from nsync.calibration_run import CalibrationRun, pinned, run_calibration
from nsync.commands import build_command, output_name
from nsync.config import AnalysisConfig
from nsync.errors import NoCudaUsed, NsysError, ProgramFailed, UsageError
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
from nsync.nsys.window import CaptureWindow, WindowOutcome, is_python, no_cuda_said, no_torch_said, window_of
from nsync.render.options import RenderOptions
from nsync.render.patch import SWITCH, render_switch
from nsync.report import Analysis
from nsync.settings import setting
from nsync.torch_run import run_torch_capture
from nsync.words import counted

Say = Callable[[str], None]
CAPTURE_RANGES = ("cudaProfilerApi", "nvtx")
BACKENDS = ("nsys", "torch", "auto")
# what only nsys does: not with --backend torch
NSYS_ONLY = ("capture_range", "nvtx_range", "python_sampling", "cpu_sampling", "nsys_arg", "nsys_path")


@dataclass(frozen=True)
class ProfileOptions:
    """What ``nsync profile`` takes besides the program, by its flags' names; the defaults are the command's.

    The window: ``warmup_steps`` optimizer steps (10), then ``steps`` captured (40), the program then ended unless
    ``run_to_end``; a program without optimizer steps is captured for ``duration`` seconds (20) once it has used
    CUDA ``wait_for_steps`` seconds (60). ``whole_run`` (or a ``capture_range``): no window, the whole run (nsys
    stopped after ``duration`` seconds, if given). ``calibrate``: run the program ``calibration_runs`` times
    without the profiler first, to fit predictions to its own speed; ``cpus``: pin both runs to these CPUs.
    ``backend``: the profiler: ``nsys``, ``torch`` (torch.profiler, started and stopped in the program), or
    ``auto`` (nsys where one that records Python backtraces is found, else torch.profiler)."""

    module: str | None = None  # run python -m MODULE
    out_dir: Path = Path("nsync-out")
    base_name: str | None = None  # the outputs' base name (default: the script's name)
    steps: int | None = None
    warmup_steps: int | None = None
    whole_run: bool = False
    run_to_end: bool = False
    wait_for_steps: float | None = None
    duration: float | None = None
    capture_range: str | None = None  # cudaProfilerApi | nvtx
    nvtx_range: str | None = None
    python_sampling: bool = False
    cpu_sampling: bool | None = None  # None: where this nsys records Python backtraces (2025.1+)
    step_marks: bool = True
    calibrate: bool = True
    calibration_runs: int = 1
    cpus: frozenset[int] | None = None
    nsys_arg: tuple[str, ...] = ()
    keep_report: bool = True
    nsys_path: str | None = None
    python: str | None = None
    config: AnalysisConfig = field(default_factory=AnalysisConfig)  # the analysis's (its step_range: --step-range)
    rerun_whole_s: float = CaptureWindow.rerun_whole_s  # a program that ends before its window this soon: rerun whole
    program_output: str = "stdout"  # where the program's own stdout goes: "stdout", or "stderr" (JSON on stdout)
    label_runs: bool = False  # a line before each run's output, where it goes: which run it is
    backend: str = "nsys"  # nsys | torch | auto

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise UsageError(f"{setting('ProfileOptions.backend')} must be nsys, torch or auto, not {self.backend!r}")
        if self.backend == "torch":
            default = ProfileOptions()
            nsys_only = [setting(f"ProfileOptions.{n}") for n in NSYS_ONLY if getattr(self, n) != getattr(default, n)]
            if nsys_only:
                raise UsageError(f"{', '.join(nsys_only)}: nsys's, not with {setting('ProfileOptions.backend')} torch")
        if self.program_output not in ("stdout", "stderr"):
            raise UsageError(f"{setting('ProfileOptions.program_output')} must be stdout or stderr")
        if self.capture_range not in (None, *CAPTURE_RANGES):
            raise UsageError(
                f"{setting('ProfileOptions.capture_range')} must be cudaProfilerApi or nvtx, not {self.capture_range!r}"
            )
        if self.whole_run or self.capture_range is not None:
            chosen: dict[str, object] = {"steps": self.steps, "warmup_steps": self.warmup_steps}
            chosen |= {"run_to_end": self.run_to_end or None, "wait_for_steps": self.wait_for_steps}
            given = [setting(f"ProfileOptions.{name}") for name, value in chosen.items() if value is not None]
            if given:
                whole = setting("ProfileOptions.whole_run or capture_range")
                raise UsageError(f"{', '.join(given)} choose a window of steps: not with {whole}")

    @property
    def window(self) -> CaptureWindow | None:
        """The window of steps captured (None: the whole run, or the capture range given)."""
        if self.whole_run or self.capture_range is not None:
            return None
        window = window_of(self.steps, self.warmup_steps, self.run_to_end, self.wait_for_steps, self.duration)
        return replace(window, rerun_whole_s=self.rerun_whole_s)

    def capture(self, target: Sequence[str]) -> CaptureOptions:
        """How nsys captures the program ``target`` (its words after nsync profile's flags)."""
        window = self.window
        return CaptureOptions(
            out_dir=self.out_dir,
            name=self.base_name or output_name(target, self.module),
            duration_s=self.duration if window is None else None,
            capture_range=self.capture_range,
            nvtx_range=self.nvtx_range,
            python_sampling=self.python_sampling,
            cpu_sampling=self.cpu_sampling,
            nsys_args=self.nsys_arg,
            keep_report=self.keep_report,
            step_marks=self.step_marks,
            window=window,
            program_output=self.program_output,
        )


@dataclass(frozen=True)
class ProfileResult:
    analysis: Analysis
    trace: Path  # the SQLite export, or torch.profiler's trace (.pt.trace.json.gz)
    report: Path | None  # the .nsys-rep, where kept
    exit_code: int  # the program's own exit code
    interrupted: bool
    calibration: Calibration | None = None

    @property
    def sqlite(self) -> Path:
        """The trace (its name before torch.profiler traces could be captured)."""
        return self.trace


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
        raise NsysError(f"{again} (tried twice){'' if again.running else ': run again'}") from None


def profile(
    target: Sequence[str],
    options: ProfileOptions | None = None,
    say: Say | None = None,
    progress: Say | None = None,
    before: Callable[[], None] | None = None,
) -> ProfileResult:
    """Capture the program ``target`` (``SCRIPT ARGS``, the arguments of ``options.module``, or any command) under
    nsys, export the report to SQLite and analyse it. With ``options.calibrate``, the program is first run without
    the profiler to time its steps (nsync.calibration), ``options.calibration_runs`` times (their steps pooled: one
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
        capture, calibration = _calibrated(command, capture, options, tell)
        if nsys is None:
            return _profiled_with_torch(command, capture, options, calibration, (tell, progress))
        _label(options, "the capture (under nsys)")
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


def _calibrated(
    command: Sequence[str], capture: CaptureOptions, options: ProfileOptions, tell: Say
) -> tuple[CaptureOptions, Calibration | None]:
    """The calibration runs (where asked), and the capture as they show it can be made."""
    target = beside(capture.base.with_suffix(".sqlite"))
    target.unlink(missing_ok=True)  # a calibration left from an earlier capture must not pass for this one's
    if not options.calibrate:
        return capture, None
    tell(
        "calibration run: the program once without the profiler, to time its own steps "
        f"({setting('ProfileOptions.calibrate=False')} skips it)"
    )
    _label(options, "the calibration run (without the profiler)")
    run = run_calibration(command, target, tell, capture.window, _fd(options.program_output))
    if run is None:
        return capture, None
    _stop_where_nothing_runs(run, capture.window)
    capture = _after_calibration(capture, run, tell)
    more = _more_runs(run.calibration, options.calibration_runs, command, capture, target, tell)
    return capture, _kept(more, target, tell)


def _fd(program_output: str) -> int | None:
    """The file descriptor the program's stdout goes to (None: where ours does)."""
    return 2 if program_output == "stderr" else None


def _label(options: ProfileOptions, run: str) -> None:
    """Which run the output below is of, where the program's output goes (a pipe or a log shows both runs)."""
    if options.label_runs:
        stream = sys.stderr if options.program_output == "stderr" else sys.stdout
        stream.write(f"-- nsync: the program's output in {run} --\n")
        stream.flush()


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
    """The capture under torch.profiler (nsync.torch_run) and its analysis."""
    tell, progress = says
    _label(options, "the capture (under torch.profiler)")
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


def _after_calibration(options: CaptureOptions, run: CalibrationRun, tell: Say) -> CaptureOptions:
    """The capture as the calibration run shows it can be: the whole run of a program that ends before its
    window does; and how long it should take."""
    window, seen = options.window, run.window
    if window is not None and seen is not None and not seen.complete(window):
        tell(
            f"the program ended on its own after {counted(seen.optimizer_steps, 'optimizer step')} in "
            f"{run.wall_s:.1f} s, before the window's {window.warmup_steps + window.steps}: capturing its whole run"
        )
        return replace(options, window=None)
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
        run = run_calibration(command, target, tell, options.window, _fd(options.program_output))
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
