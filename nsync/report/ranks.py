"""``nsync ranks``'s result: several ranks of one data-parallel run lined up (nsync.ranks computes it), as the
renderers print it and the JSON (schema ``nsync.ranks/2``) writes it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, ClassVar

from nsync.notices import Notice
from nsync.report.analysis import Analysis
from nsync.report.typed import load_typed, plain

SCHEMA = "nsync.ranks/2"


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
class Ranks:
    """The ranks lined up on their collectives: which reaches them last, and the syncs that make it late."""

    SCHEMA: ClassVar[str] = SCHEMA
    READS: ClassVar[tuple[str, ...]] = ("nsync.ranks/1", SCHEMA)  # /1: warnings as text

    schema: str
    ranks: list[RankFacts]
    collectives: int  # lined up across every rank
    clock_offsets_ms: list[float]  # per rank, to rank 0's clock
    held_ms_per_step: float  # the last rank's lateness, summed over the collectives of a step
    stragglers: list[Straggler]
    verdict: str
    worth_fixing: bool
    warnings: list[Notice]
    reports: list[Analysis]  # each rank's own analysis (no timeline, no tables)

    def __repr__(self) -> str:
        return f"<nsync.Ranks of {len(self.ranks)} ranks, {self.collectives} collectives lined up: {self.verdict}>"

    def to_dict(self) -> dict[str, Any]:
        return plain(self)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Ranks:
        """The lined-up ranks that ``nsync ranks --json`` wrote."""
        return load_typed(cls, path, "an nsync ranks result")
