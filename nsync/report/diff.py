"""``nsync diff``'s result: two runs of one program compared (nsync.comparison computes it), as every renderer
prints it and, less the two runs' timelines, as its JSON (``nsync.diff/1``)."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from nsync.report.sites import where
from nsync.report.timeline import Timeline
from nsync.report.typed import NOT_IN_JSON, load_typed, plain

SCHEMA = "nsync.diff/1"
NOISE_FLOOR_PCT = 2.0  # step-time changes below this never count, however quiet the runs
DiffVerdict = Literal["regression", "improvement", "no-change", "unclear", "inconclusive"]


@dataclass(frozen=True)
class Change:
    """One figure in both runs, and the candidate's minus the baseline's (None where a side has none)."""

    baseline: float | None
    candidate: float | None
    delta: float | None


@dataclass(frozen=True)
class UnprofiledStepTimes:
    """The two runs' step times predicted without the profiler (each run's what-if), in ms."""

    baseline: float
    candidate: float
    delta_pct: float | None
    calibrated: bool  # both runs calibrated: the verdict's basis then
    noise_pct: float | None  # where the calibration runs are the verdict's basis: the largest of noise_from's
    between_runs_pct: float | None = None  # of that noise: two runs' hosts on one machine (WhatIf.between_runs_pct)
    noise_from: str = ""  # what sets the noise: one of nsync.comparison.NOISE_SOURCES


@dataclass(frozen=True)
class StepTimes:
    """The two runs' median step times under the profiler (ms), their noise, and which the verdict used."""

    baseline: float | None
    candidate: float | None
    delta: float | None
    delta_pct: float | None
    noise_pct: float | None
    basis: str  # gpu | nvtx | none: which step times
    verdict_basis: str  # profiled | unprofiled (calibrated)
    profiled_verdict: DiffVerdict  # what the profiled steps alone say, whichever basis the verdict takes
    unprofiled: UnprofiledStepTimes | None  # where both runs have a what-if
    two_machines: bool = False  # the runs ran on two physical GPUs: the noise is that between machines


@dataclass(frozen=True)
class DiffSide:
    path: str
    nsys_version: str | None
    program: str
    gpus: list[str]
    steps: int
    step_source: str


@dataclass(frozen=True)
class DiffSite:
    file: str
    line: int | None  # in the candidate; a removed site keeps its baseline line
    baseline_line: int | None
    function: str
    issued_at: str | None
    status: str  # added | removed | grown | shrunk | unchanged
    baseline_exposed_idle_ms_per_step: float | None
    candidate_exposed_idle_ms_per_step: float | None
    delta_ms_per_step: float | None

    @property
    def where(self) -> str:
        return where(self.file, self.line, self.function)


@dataclass(frozen=True)
class Diff:
    """Two runs compared: the step time against its noise, GPU idle, and the call sites that changed."""

    SCHEMA: ClassVar[str] = SCHEMA

    schema: str
    verdict: DiffVerdict
    reasons: list[str]  # why the runs cannot be compared (inconclusive), or a regression not ruled out (unclear)
    baseline: DiffSide
    candidate: DiffSide
    step_ms: StepTimes
    gpu_idle_ms_per_step: Change
    exposed_idle_ms_per_step: Change
    callsites: list[DiffSite]  # sorted by the size of the delta
    noise_floor_pct: float = dataclasses.field(default=NOISE_FLOOR_PCT, metadata=NOT_IN_JSON)
    # each run's timeline, for the HTML
    timelines: tuple[Timeline | None, Timeline | None] = dataclasses.field(default=(None, None), metadata=NOT_IN_JSON)

    def __repr__(self) -> str:
        delta = self.verdict_delta_pct
        change = "" if delta is None else f", step {delta:+.1f} %"
        names = f"{Path(self.baseline.path).name} -> {Path(self.candidate.path).name}"
        return f"<nsync.Diff {names}: {self.verdict}{change}>"

    @property
    def verdict_delta_pct(self) -> float | None:
        """The step time's change on the verdict's basis (profiled, or predicted unprofiled)."""
        step = self.step_ms
        if step.verdict_basis != "profiled" and step.unprofiled is not None:
            return step.unprofiled.delta_pct
        return step.delta_pct

    def regressed_beyond(self, pct: float) -> bool:
        """The CI gate: a regression verdict with the step time worse by more than ``pct`` percent (on the
        verdict's basis)."""
        delta = self.verdict_delta_pct
        return self.verdict == "regression" and delta is not None and delta > pct

    @property
    def timeline_scale_ms(self) -> float | None:
        """The longer of the two representative steps: both are drawn on this time scale."""
        lengths = [(t.median_step_ns[1] - t.median_step_ns[0]) / 1e6 for t in self.timelines if t and t.median_step_ns]
        return max(lengths) if lengths else None

    def library_frames(self, top: int) -> bool:
        """Whether any of the first ``top`` sites is issued by a library (the renderers then show where)."""
        return any(site.issued_at for site in self.callsites[:top])

    def to_dict(self) -> dict[str, Any]:
        """The JSON's content: the step times' prediction without the profiler is written as ``unprofiled_*``
        keys of ``step_ms``, present only where both runs have one."""
        data: dict[str, Any] = plain(self)
        unprofiled = data["step_ms"].pop("unprofiled")
        if unprofiled is not None:
            data["step_ms"].update({f"unprofiled_{key}": value for key, value in unprofiled.items()})
        return data

    @staticmethod
    def json_shape(data: dict[str, Any]) -> None:
        """The JSON's ``step_ms.unprofiled_*`` keys back into StepTimes.unprofiled (to_dict's inverse)."""
        step = data.get("step_ms")
        if isinstance(step, dict):
            keys = [key for key in step if key.startswith("unprofiled_")]
            step["unprofiled"] = {key.removeprefix("unprofiled_"): step.pop(key) for key in keys} or None

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Diff:
        """A diff that ``nsync diff --json`` wrote (less the timelines, which the JSON does not hold)."""
        return load_typed(cls, path, "an nsync diff")
