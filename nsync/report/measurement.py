"""``nsync measure``'s result: two commands' steps timed without the profiler in alternate runs (or one program's
two versions in alternating blocks), and the change from the first to the second with its interval
(``nsync.measure/1``; nsync.measuring computes it)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from nsync.report.typed import load_typed, plain

SCHEMA = "nsync.measure/1"
CONFIDENCE = 0.95
THRESHOLD_PCT = 5.0  # a change under this is "the same" (the analysis's worth-fixing share of a step)
MeasureVerdict = Literal["faster", "slower", "same", "unclear"]


@dataclass(frozen=True)
class MeasuredCommand:
    label: str  # A (the baseline), B (the candidate)
    command: list[str]
    run_median_step_ms: list[float]  # each run's median step, in the order run
    steps_per_run: list[int]
    median_step_ms: float  # the geometric mean of the run medians (one command: of the block medians)
    run_spread_pct: float  # the standard deviation of log run medians, as a percentage
    block_median_step_ms: list[float] | None = None  # one command: each of its blocks' median step, in order
    block_spread_pct: float | None = None  # one command: the standard deviation of log block medians


@dataclass(frozen=True)
class MeasuredChange:
    """B against A: positive is slower."""

    ms_per_step: float
    pct: float
    low_pct: float  # the 95 % interval
    high_pct: float
    low_ms: float
    high_ms: float
    runs_to_tell: int | None  # unclear: runs (of each) that would likely settle it (None: over 100)
    steps_to_tell: int | None = None  # one command, one run, unclear: steps to time that would likely settle it
    run_pct: list[float] | None = None  # one command: each run's change, from its pairs of blocks


@dataclass(frozen=True)
class Measurement:
    """B against A, timed without the profiler."""

    SCHEMA: ClassVar[str] = SCHEMA

    schema: str
    verdict: MeasureVerdict
    step_source: str  # marks (optimizer steps) or nvtx:NAME
    order: list[str]  # the labels in the order the runs were made (one command: none, each run ran both)
    baseline: MeasuredCommand
    candidate: MeasuredCommand
    change: MeasuredChange
    threshold_pct: float = THRESHOLD_PCT
    confidence: float = CONFIDENCE
    notes: list[str] | None = None

    def __repr__(self) -> str:
        change = self.change
        return (
            f"<nsync.Measurement {self.baseline.label} -> {self.candidate.label}: {self.verdict}, "
            f"{change.pct:+.1f} % ({change.low_pct:+.1f} to {change.high_pct:+.1f} %)>"
        )

    interrupted: bool = False  # Ctrl-C ended the runs early: the figures are of those made before it
    block_steps: int | None = None  # one command: its two versions alternated in blocks of this many steps

    def to_dict(self) -> dict[str, Any]:
        return plain(self)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Measurement:
        """A measurement that ``nsync measure --json`` wrote."""
        return load_typed(cls, path, "an nsync measurement")
