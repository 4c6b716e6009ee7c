"""The calibration run: the program once without the profiler, its steps timed by nsync's sitecustomize
(nsync/nsys/inject) in its calibration mode; what it gives is a :class:`nsync.calibration.Calibration`.
Capture side: nsync.profile runs it before the capture; the analysis only reads its result."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from nsync.calibration import Calibration, intervals_of
from nsync.nsys import inject
from nsync.nsys.window import CaptureWindow, WindowOutcome, outcome

RUN_SCHEMA = "nsync.calibration-run/1"  # what the sitecustomize writes (one file per process)
Say = Callable[[str], None]


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
        """The exception that ended it before its first step (no optimizer step, no window by the clock, nothing
        timed): a SyntaxError, an ImportError; None where it did not (a program may exit with a code of its own)."""
        seen = self.window
        if not self.failed or seen is None or self.calibration is not None or seen.optimizer_steps or seen.opened_by:
            return None
        return seen.uncaught

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
        env = {**os.environ, "NSYNC_CALIBRATE_DIR": scratch}
        env.pop("NSYNC_AB", None)
        if switch_block is not None:
            env["NSYNC_AB"] = str(switch_block)
        env["PYTHONPATH"] = inject.pythonpath(env.get("PYTHONPATH"))
        if window is not None:
            env.update(window.env(Path(scratch), ending=True))
        began = time.monotonic()
        code = subprocess.run(list(command), env=env, stdout=stdout, check=False).returncode
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
