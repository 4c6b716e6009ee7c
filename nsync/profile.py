"""``nsync profile``: capture a program under nsys, export, and analyse, as one public function."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from nsync.analysis import Analysis, analyze
from nsync.calibration import Calibration, beside, run_calibration
from nsync.config import AnalysisConfig
from nsync.errors import UsageError
from nsync.nsys import CaptureOptions, export_sqlite, find_nsys, run_capture

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


def profile(
    command: Sequence[str],
    options: CaptureOptions,
    config: AnalysisConfig | None = None,
    nsys_path: str | None = None,
    say: Say | None = None,
    progress: Callable[[str], None] | None = None,
    calibrate: bool = True,
    cpus: frozenset[int] | None = None,
) -> ProfileResult:
    """Capture ``command`` under nsys, export the report to SQLite and analyse it. With ``calibrate``, the
    program is first run once without the profiler to time its steps (nsync.calibration). ``cpus``: the CPUs
    both runs are pinned to (the same host speed for both; fixtures/h200/README.md measures what it buys).

    The program's exit code is returned, not raised: what was captured is analysed either way.
    """
    tell = say or (lambda _m: None)
    nsys = find_nsys(nsys_path)
    prepare_output(options.out_dir)
    if cpus:
        tell(f"running the program on CPUs {', '.join(map(str, sorted(cpus)))}")
    with pinned(cpus):
        calibration = None
        target = beside(options.base.with_suffix(".sqlite"))
        target.unlink(missing_ok=True)  # a calibration left from an earlier capture must not pass for this one's
        if calibrate:
            tell(
                "calibration run: the program once without the profiler, to time its own steps "
                "(profile(calibrate=False) skips it)"
            )
            calibration = run_calibration(command, target, tell)
            if calibration is not None:
                timed = ", ".join(f"{k} ({len(v) + 1} times)" for k, v in calibration.intervals_ns.items())
                tell(f"calibration: timed {timed} in {calibration.wall_s:.1f} s; wrote {target}")
        tell(f"capturing with nsys {nsys.version_str} ({nsys.path})")
        captured = run_capture(nsys, command, options, tell)
        assert captured.report is not None
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
