"""The report of a diff, built once from a :class:`nsync.comparison.Diff`: what every diff renderer (terminal,
Markdown, HTML) prints, and, less the two runs' timelines, the JSON (``nsync.diff/1``)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsync.comparison import NOISE_FLOOR_PCT, SCHEMA, Change, StepTimes
from nsync.report.analysis import Timeline, ns_to_ms, timeline_of, where
from nsync.report.typed import read_typed

if TYPE_CHECKING:
    from nsync.analysis import Analysis
    from nsync.comparison import Diff


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
        return where(self.file, self.line)


@dataclass(frozen=True)
class DiffReport:
    schema: str
    verdict: str  # regression | improvement | no-change | inconclusive
    reasons: list[str]
    baseline: DiffSide
    candidate: DiffSide
    step_ms: StepTimes
    gpu_idle_ms_per_step: Change
    exposed_idle_ms_per_step: Change
    callsites: list[DiffSite]  # sorted by the size of the delta
    # not written out: the noise floor the verdict used, and each run's timeline for the HTML
    noise_floor_pct: float = NOISE_FLOOR_PCT
    timelines: tuple[Timeline | None, Timeline | None] = (None, None)

    @property
    def timeline_scale_ms(self) -> float | None:
        """The longer of the two representative steps: both are drawn on this time scale."""
        lengths = [(t.median_step_ns[1] - t.median_step_ns[0]) / 1e6 for t in self.timelines if t and t.median_step_ns]
        return max(lengths) if lengths else None

    def library_frames(self, top: int) -> bool:
        """Whether any of the first ``top`` sites is issued by a library (the renderers then show where)."""
        return any(site.issued_at for site in self.callsites[:top])


def build_diff_report(result: Diff) -> DiffReport:
    rows = result.callsites.astype({"line_b": float, "line_c": float}).to_dict("records")
    return DiffReport(
        schema=SCHEMA,
        verdict=result.verdict,
        reasons=list(result.reasons),
        baseline=_side(result.baseline),
        candidate=_side(result.candidate),
        step_ms=result.step_ms,
        gpu_idle_ms_per_step=result.gpu_idle_ms_per_step,
        exposed_idle_ms_per_step=result.exposed_idle_ms_per_step,
        callsites=[_site(row) for row in rows],
        noise_floor_pct=result.noise_floor_pct,
        timelines=(timeline_of(result.baseline), timeline_of(result.candidate)),
    )


def as_diff_report(source: DiffReport | Diff) -> DiffReport:
    """Renderers take a diff report; given a diff, they build its report first."""
    return source if isinstance(source, DiffReport) else build_diff_report(source)


def diff_report_to_dict(report: DiffReport) -> dict[str, Any]:
    """The JSON's content: the step times' prediction without the profiler is written as ``unprofiled_*`` keys
    of ``step_ms``, present only where both runs have one."""
    data = asdict(replace(report, timelines=(None, None)))  # the timelines are not copied to be dropped
    del data["noise_floor_pct"], data["timelines"]
    unprofiled = data["step_ms"].pop("unprofiled")
    if unprofiled is not None:
        data["step_ms"].update({f"unprofiled_{key}": value for key, value in unprofiled.items()})
    return data


def _side(analysis: Analysis) -> DiffSide:
    return DiffSide(
        path=analysis.trace_path,
        nsys_version=analysis.nsys_version,
        program=analysis.program,
        gpus=list(analysis.gpus),
        steps=analysis.steps.count,
        step_source=analysis.steps.source,
    )


def _site(row: dict[str, Any]) -> DiffSite:
    line = None if math.isnan(row["line_c"]) else int(row["line_c"])
    baseline_line = None if math.isnan(row["line_b"]) else int(row["line_b"])
    return DiffSite(
        file=row["file"],
        line=line if line is not None else baseline_line,
        baseline_line=baseline_line,
        function=row["function"],
        issued_at=row["issued"] or None,
        status=row["status"],
        baseline_exposed_idle_ms_per_step=ns_to_ms(row["per_step_ns_b"]),
        candidate_exposed_idle_ms_per_step=ns_to_ms(row["per_step_ns_c"]),
        delta_ms_per_step=ns_to_ms(row["delta_ns"]),
    )


def read_diff_report(path: Path) -> DiffReport:
    """A diff that ``nsync diff --json`` wrote (less the timelines, which the JSON does not hold)."""
    return read_typed(DiffReport, path, SCHEMA, "an nsync diff", _unprofiled_apart)


def _unprofiled_apart(data: dict[str, Any]) -> None:
    """The JSON's ``step_ms.unprofiled_*`` keys back into StepTimes.unprofiled (diff_report_to_dict's inverse)."""
    step = data.get("step_ms")
    if isinstance(step, dict):
        keys = [key for key in step if key.startswith("unprofiled_")]
        step["unprofiled"] = {key.removeprefix("unprofiled_"): step.pop(key) for key in keys} or None
