"""A calibration: the program's own step times without the profiler, which the what-if is fitted to.

``nsync profile`` runs the program once (``--calibration-runs N``: N times, their steps pooled) without nsys
before capturing it (nsync.capturing.calibrate), with nsync's ``sitecustomize`` in its calibration mode
(``nsync/capturing/inject``): CUDA events recorded at each optimizer step and each NVTX ``range_push`` give the
GPU time between successive steps, unprofiled. This
module holds what the analysis reads of it, and nothing that runs a program. They are stored beside the
SQLite as ``NAME.calibration.json`` (schema :data:`SCHEMA`); ``nsync analyze`` and ``nsync diff`` pick the
file up and fit the replay's host scale so that the replayed capture runs at the program's own speed
(docs/how-it-works.md, "Undoing the profiler").
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from nsync.errors import TraceError
from nsync.jsonfile import read_versioned
from nsync.load.files import trace_stem

SCHEMA = "nsync.calibration/1"
SUFFIX = ".calibration.json"


@dataclass(frozen=True)
class Calibration:
    """Unprofiled GPU time between successive steps, per step source (``marks``, ``nvtx:NAME``)."""

    path: Path | None
    intervals_ns: dict[str, np.ndarray]
    command: tuple[str, ...] = ()
    exit_code: int = 0
    wall_s: float = 0.0
    window_from: dict[str, int] = field(default_factory=dict)  # per source, the first interval in the window
    run_medians_ns: dict[str, tuple[float, ...]] = field(default_factory=dict)  # per source, each run's median step
    run_lengths: dict[str, tuple[int, ...]] = field(default_factory=dict)  # per source, each run's interval count

    @property
    def runs(self) -> int:
        """How many calibration runs the steps were pooled from."""
        return max((len(v) for v in self.run_medians_ns.values()), default=1)

    def spread(self, source: str, per_step: int = 1) -> float:
        """The factor between the runs' median steps and their pooled median, at least 1 (one run: 1). A step of
        ``per_step`` optimizer steps is compared whole, where the file says where each run's intervals end: the
        median of a GAN's alternating 5 and 10 ms intervals falls anywhere between them."""
        medians, steps = self.run_medians_ns.get(source, ()), self.intervals_ns.get(source)
        if len(medians) < 2 or steps is None or not len(steps):
            return 1.0
        runs = self._runs(source, per_step)
        if len(runs) > 1:
            medians = tuple(float(np.median(run)) for run in runs if len(run))
            steps = np.concatenate(runs)
        if len(medians) < 2 or not len(steps):
            return 1.0
        pooled = float(np.median(steps))
        return max(max(medians) / pooled, pooled / min(medians), 1.0)

    def _runs(self, source: str, per_step: int) -> list[np.ndarray]:
        """The steps of ``source`` (``per_step`` intervals each), one array per run where the file says where each
        run ends (else one)."""
        intervals = self.intervals_ns[source]
        lengths = self.run_lengths.get(source, ())
        runs = (
            np.split(intervals, np.cumsum(lengths)[:-1])
            if len(lengths) > 1 and sum(lengths) == len(intervals)
            else [intervals]
        )
        return [_whole_steps(run, per_step) for run in runs]

    def of_window(self) -> Calibration:
        """The steps inside the capture window only (a windowed capture holds those alone)."""
        intervals = {source: v[self.window_from.get(source, 0) :] for source, v in self.intervals_ns.items()}
        return replace(self, intervals_ns={source: v for source, v in intervals.items() if len(v)}, window_from={})

    def steps_ns(self, source: str, warmup: int, per_step: int = 1) -> np.ndarray | None:
        """The unprofiled steps of ``source`` after ``warmup`` of them; None when not timed.

        The intervals run from one step's start to the next, so interval k is step k: the first
        ``warmup`` are left out as the analysis leaves out its warm-up steps, from each run where several are
        pooled (each whole run starts cold: its first step is several times the rest). A step of ``per_step``
        optimizer steps (a GAN's iteration) is the sum of as many successive intervals."""
        if source not in self.intervals_ns:
            return None
        kept = [steps[warmup:] for steps in self._runs(source, per_step) if len(steps) > warmup]
        return np.concatenate(kept) if kept else None


def _whole_steps(intervals: np.ndarray, per_step: int) -> np.ndarray:
    """Each run of ``per_step`` successive intervals summed: the program's steps (a part step at the end dropped)."""
    whole = len(intervals) // per_step
    return intervals[: whole * per_step].reshape(whole, per_step).sum(axis=1)


def beside(trace: Path) -> Path:
    """Where ``nsync profile`` writes the calibration of ``trace`` (NAME.sqlite, NAME.sqlite.xz, NAME.nsys-rep
    or NAME.pt.trace.json.gz): NAME.calibration.json next to it."""
    return trace.with_name(trace_stem(trace) + SUFFIX)


def pooled(runs: list[Calibration]) -> Calibration:
    """Several calibration runs of one program as one: each source's steps pooled (so that one run on a slow
    moment of the host counts for its share), with each run's median step kept."""
    first = runs[0]
    sources = [source for source in first.intervals_ns if all(source in run.intervals_ns for run in runs)]
    return replace(
        first,
        intervals_ns={source: np.concatenate([run.intervals_ns[source] for run in runs]) for source in sources},
        run_medians_ns={
            source: tuple(float(np.median(run.intervals_ns[source])) for run in runs) for source in sources
        },
        run_lengths={source: tuple(len(run.intervals_ns[source]) for run in runs) for source in sources},
        wall_s=sum(run.wall_s for run in runs),
        window_from={},
    )


def write_calibration(calibration: Calibration, target: Path) -> None:
    document = {
        "schema": SCHEMA,
        "what": "unprofiled GPU time between successive steps of the program, per step source (nsync profile)",
        "command": list(calibration.command),
        "exit_code": calibration.exit_code,
        "wall_s": round(calibration.wall_s, 3),
        "intervals_ns": {source: values.tolist() for source, values in calibration.intervals_ns.items()},
    }
    if calibration.runs > 1:  # the steps of several runs, pooled: each run's median beside them
        document["run_medians_ns"] = {source: list(v) for source, v in calibration.run_medians_ns.items()}
        document["run_lengths"] = {source: list(v) for source, v in calibration.run_lengths.items()}
    target.write_text(json.dumps(document, indent=1) + "\n")


def read_calibration(path: Path) -> Calibration:
    """A calibration file, checked: a one-line error for anything else (nsync.jsonfile)."""
    data = read_versioned(path, SCHEMA, "an nsync calibration file")
    command = data.get("command")
    return Calibration(
        path=path,
        intervals_ns=intervals_of(data.get("intervals_ns"), path, strict=True),
        command=tuple(str(word) for word in command) if isinstance(command, list) else (),
        exit_code=int(data.get("exit_code") or 0),
        wall_s=float(data.get("wall_s") or 0.0),
        run_medians_ns={source: tuple(v) for source, v in intervals_of(data.get("run_medians_ns"), path).items()},
        run_lengths={
            source: tuple(int(n) for n in v) for source, v in intervals_of(data.get("run_lengths"), path).items()
        },
    )


def intervals_of(value: Any, path: Path, strict: bool = False) -> dict[str, np.ndarray]:
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
