"""The calibration run: the program's own step times without the profiler, which the what-if is fitted to.

``nsync profile`` runs the program once without nsys before capturing it, with nsync's ``sitecustomize``
in its calibration mode (``nsync/nsys/inject``): CUDA events recorded at each optimizer step and each
NVTX ``range_push`` give the GPU time between successive steps, unprofiled. They are stored beside the
SQLite as ``NAME.calibration.json`` (schema :data:`SCHEMA`); ``nsync analyze`` and ``nsync diff`` pick the
file up and fit the replay's host scale so that the replayed capture runs at the program's own speed
(docs/how-it-works.md, "Undoing the profiler").
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from nsync.errors import TraceError
from nsync.jsonfile import read_versioned
from nsync.nsys import inject
from nsync.nsys.window import CaptureWindow, WindowOutcome, outcome

SCHEMA = "nsync.calibration/1"
RUN_SCHEMA = "nsync.calibration-run/1"  # what the sitecustomize writes (one file per process)
SUFFIX = ".calibration.json"

Say = Callable[[str], None]


@dataclass(frozen=True)
class Calibration:
    """Unprofiled GPU time between successive steps, per step source (``marks``, ``nvtx:NAME``)."""

    path: Path | None
    intervals_ns: dict[str, np.ndarray]
    command: tuple[str, ...] = ()
    exit_code: int = 0
    wall_s: float = 0.0
    window_from: dict[str, int] = field(default_factory=dict)  # per source, the first interval in the window

    def of_window(self) -> Calibration:
        """The steps inside the capture window only (a windowed capture holds those alone)."""
        intervals = {source: v[self.window_from.get(source, 0) :] for source, v in self.intervals_ns.items()}
        return replace(self, intervals_ns={source: v for source, v in intervals.items() if len(v)}, window_from={})

    def steps_ns(self, source: str, warmup: int) -> np.ndarray | None:
        """The unprofiled steps of ``source`` after ``warmup`` of them; None when not timed.

        The intervals run from one step's start to the next, so interval k is step k: the first
        ``warmup`` are left out as the analysis leaves out its warm-up steps."""
        intervals = self.intervals_ns.get(source)
        if intervals is None or len(intervals) <= warmup:
            return None
        return intervals[warmup:]


def beside(trace: Path) -> Path:
    """Where ``nsync profile`` writes the calibration of ``trace`` (NAME.sqlite, NAME.sqlite.xz or
    NAME.nsys-rep): NAME.calibration.json next to it."""
    name = trace.name
    for suffix in (".sqlite.xz", ".sqlite", ".nsys-rep"):
        name = name.removesuffix(suffix)
    return trace.with_name(name + SUFFIX)


@dataclass(frozen=True)
class CalibrationRun:
    """What the calibration run gave: its timings (None: it timed no steps) and what its window saw."""

    calibration: Calibration | None
    window: WindowOutcome | None
    exit_code: int
    wall_s: float


def run_calibration(
    command: Sequence[str], target: Path, say: Say, window: CaptureWindow | None = None
) -> CalibrationRun | None:
    """Run ``command`` without the profiler, timing its steps; with ``window``, ended after it as the capture
    will be. The program's output goes where it would; None (and a note) when it could not start. The
    timings are not written: :func:`write_calibration` does that for what the capture will hold."""
    with tempfile.TemporaryDirectory(prefix="nsync-calibrate-") as scratch:
        env = {**os.environ, "NSYNC_CALIBRATE_DIR": scratch}
        env["PYTHONPATH"] = inject.pythonpath(env.get("PYTHONPATH"))
        if window is not None:
            env.update(window.env(Path(scratch), ending=True))
        began = time.monotonic()
        try:
            code = subprocess.run(list(command), env=env, check=False).returncode
        except OSError as err:
            say(f"note: calibration run could not start ({err.strerror}): predictions will be uncalibrated")
            return None
        wall_s = time.monotonic() - began
        runs = [_read_run(path) for path in sorted(Path(scratch).glob("calibration-*.json"))]
        seen = outcome(Path(scratch)) if window is not None else None
    ended_by_nsync = seen is not None and seen.ended_program
    if code != 0 and not ended_by_nsync:
        say(f"note: the calibration run exited with code {code}")
    timed = [run for run in runs if run[0]]
    if not timed:
        say(
            "note: the calibration run timed no steps (no optimizer step or NVTX range on a CUDA stream): "
            "predictions will be uncalibrated"
        )
        return CalibrationRun(None, seen, code, wall_s)
    # the process that timed most steps is the training one (not a data-loader worker)
    intervals, window_from = max(timed, key=lambda run: max(len(v) for v in run[0].values()))
    calibration = Calibration(target, intervals, tuple(command), code, wall_s, window_from)
    return CalibrationRun(calibration, seen, code, wall_s)


def _read_run(path: Path) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """One process's timings, and where its window began in each (empty when unreadable)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}, {}
    if not isinstance(data, dict) or data.get("schema") != RUN_SCHEMA:
        return {}, {}
    began = data.get("window_from")
    window_from = (
        {k: v for k, v in began.items() if isinstance(k, str) and isinstance(v, int) and v >= 0}
        if isinstance(began, dict)
        else {}
    )
    return _intervals(data.get("intervals_ns"), path), window_from


def write_calibration(calibration: Calibration, target: Path) -> None:
    document = {
        "schema": SCHEMA,
        "what": "unprofiled GPU time between successive steps of the program, per step source (nsync profile)",
        "command": list(calibration.command),
        "exit_code": calibration.exit_code,
        "wall_s": round(calibration.wall_s, 3),
        "intervals_ns": {source: values.tolist() for source, values in calibration.intervals_ns.items()},
    }
    target.write_text(json.dumps(document, indent=1) + "\n")


def read_calibration(path: Path) -> Calibration:
    """A calibration file, checked: a one-line error for anything else (nsync.jsonfile)."""
    data = read_versioned(path, SCHEMA, "an nsync calibration file")
    command = data.get("command")
    return Calibration(
        path=path,
        intervals_ns=_intervals(data.get("intervals_ns"), path, strict=True),
        command=tuple(str(word) for word in command) if isinstance(command, list) else (),
        exit_code=int(data.get("exit_code") or 0),
        wall_s=float(data.get("wall_s") or 0.0),
    )


def _intervals(value: Any, path: Path, strict: bool = False) -> dict[str, np.ndarray]:
    """``{source: [positive ns, ...]}``; malformed entries are an error (``strict``) or left out."""
    if not isinstance(value, dict):
        if strict:
            raise TraceError(f"{path}: no intervals_ns table")
        return {}
    out: dict[str, np.ndarray] = {}
    for source, values in value.items():
        if isinstance(source, str) and isinstance(values, list) and all(_positive_ns(v) for v in values):
            out[source] = np.asarray(values, dtype=float)
        elif strict:
            raise TraceError(f"{path}: the timings of {source!r} are not a list of positive nanoseconds")
    return out


def _positive_ns(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < 1e15
