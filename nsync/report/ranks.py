"""The report of several ranks of one data-parallel run (``nsync ranks``): what nsync.ranks found, as the
renderers print it and the JSON (schema ``nsync.ranks/1``) writes it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nsync.report.analysis import Report
from nsync.report.typed import read_typed


@dataclass(frozen=True)
class Straggler:
    """A call site of a late rank, by the delay its syncs added to every rank's collectives."""

    rank: int
    where: str
    issued_at: str
    function: str
    collectives_delayed: int
    delay_ms_per_step: float


@dataclass(frozen=True)
class RankFacts:
    rank: int
    path: str
    steps: int
    median_step_ms: float | None
    gpu_idle_ms_per_step: float | None
    collectives: int
    last_at: int  # collectives this rank reached last
    lateness_ms_per_step: float  # how late it was at them, summed, per step


@dataclass(frozen=True)
class RanksReport:
    schema: str
    ranks: list[RankFacts]
    collectives: int  # lined up across every rank
    clock_offsets_ms: list[float]  # per rank, to rank 0's clock
    held_ms_per_step: float  # the last rank's lateness, summed over the collectives of a step
    stragglers: list[Straggler]
    verdict: str
    worth_fixing: bool
    warnings: list[str]
    reports: list[Report]  # each rank's own analysis


SCHEMA = "nsync.ranks/1"


def read_ranks_report(path: Path) -> RanksReport:
    """The lined-up ranks that ``nsync ranks --json`` wrote."""
    return read_typed(RanksReport, path, SCHEMA, "an nsync ranks result")
