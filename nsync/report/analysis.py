"""``nsync analyze``'s result: every figure the renderers print, as typed facts, and the tables behind them.

``nsync.analyze`` returns an :class:`Analysis`; ``--json`` writes its facts (schema ``nsync.analysis/2``) and
:meth:`Analysis.load` reads them back, so that a saved result renders as the fresh one did (``nsync analyze
--from``). The DataFrames behind the facts (every sync, every call site) ride along in ``tables`` where the
analysis ran, and are never written to the JSON. Renderers only print: figures derived from others (per step,
shares, what a fix leaves) are the properties here. Times are in the unit their name says.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from nsync.config import AnalysisConfig
from nsync.notices import Notice
from nsync.report.sites import CallSite, FixedTogether, OnceSite, ReadTogether
from nsync.report.tables import AnalysisTables
from nsync.report.timeline import Timeline
from nsync.report.typed import NOT_IN_JSON, load_typed, plain

SCHEMA = "nsync.analysis/2"
# a likely range holds this share of measured savings (nsync.stages.replay.likely fits it)
LIKELY_COVERAGE = 0.8
LIKELY = f"{100 * LIKELY_COVERAGE:.0f} % likely"  # how every output names a likely range
NS_PER_MS = 1e6
Status = Literal["ok", "no-cuda", "no-gpu-work"]


def ns_to_ms(value_ns: float | None) -> float | None:
    if value_ns is None or (isinstance(value_ns, float) and math.isnan(value_ns)):
        return None
    return round(float(value_ns) / NS_PER_MS, 6)


def _less(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def threshold_pct(config: AnalysisConfig) -> float:
    """The saving, as a share of the step, from which a sync is worth fixing."""
    return round(100 * config.worth_fixing_share, 2)


@dataclass(frozen=True)
class TraceFacts:
    path: str
    nsys_version: str | None
    export_schema_version: str | None
    gpus: list[str]
    profiler: str = "nsys"  # what wrote the trace: "nsys", or "torch.profiler" (a Kineto trace)

    @property
    def made_by(self) -> str:
        """``nsys 2025.3.2`` (``nsys ?`` where the export does not say), or ``torch.profiler``."""
        return f"nsys {self.nsys_version or '?'}" if self.profiler == "nsys" else self.profiler


@dataclass(frozen=True)
class StepFacts:
    count: int  # the analysed steps (after the warm-up)
    median_ms: float | None
    gpu_median_ms: float | None
    source: str  # "nvtx:train_step", "marks", "kernel period", "none"...
    total: int  # every step found
    warmup_skipped: int
    set_aside: int  # steps 3x the median or more, left out
    each: str = ""  # what one step is, where known: "one new token of generate()" (else a loop's iteration)
    mean_ms: float | None = None  # beside the median: a bimodal or data-bound loop's mean step is not its median
    data_wait_ms: float | None = None  # the host's mean wait for its DataLoader a step (nsync profile marks it)

    @property
    def mean_apart(self) -> bool:
        """Whether the mean step is over a tenth off the median (bimodal steps, waits for data): both are said."""
        mean, median = self.mean_ms, self.median_ms
        return mean is not None and median is not None and abs(mean - median) > 0.1 * median


@dataclass(frozen=True)
class Window:
    start_ns: int
    end_ns: int


@dataclass(frozen=True)
class GpuIdle:
    device_id: int
    name: str
    idle_ms: float | None
    idle_pct: float | None


@dataclass(frozen=True)
class Totals:
    """Sums over the analysed steps (the whole window when there are none)."""

    span_ms: float | None
    gpu_count: int
    gpu_idle_ms: float | None
    gpu_busy_ms: float | None
    gpu_idle_pct: float | None  # of span x GPUs
    per_gpu: list[GpuIdle]
    exposed_idle_ms: float | None
    host_wait_ms: float | None
    sync_count: int
    syncs_outside_window: int
    predicted_step_ms_without_syncs: float | None

    @property
    def gpu_busy_pct(self) -> float | None:
        return None if self.gpu_idle_pct is None else 100 - self.gpu_idle_pct

    @property
    def exposed_idle_pct(self) -> float | None:
        """Of the wall time of every GPU."""
        if not self.span_ms or not self.gpu_count or self.exposed_idle_ms is None:
            return None
        return 100 * self.exposed_idle_ms / (self.span_ms * self.gpu_count)


@dataclass(frozen=True)
class VerdictFacts:
    """Whether the largest fix is worth making: its saving, its 80 % likely range, and the chance that it saves
    at least the threshold (``chance_pct``), which the verdict is read from."""

    text: str
    worth_fixing: bool
    largest_saving_ms_per_step: float | None
    share_pct: float
    site: str
    all_syncs_together: bool
    threshold_pct: float
    largest_saving_ms_per_step_low: float | None = None  # its 80 % likely range
    largest_saving_ms_per_step_high: float | None = None
    measure: bool = False  # too near the threshold to say either way: measure it
    chance_pct: float | None = None  # the chance the fix saves at least threshold_pct of the step
    fix_scope: str = "call site"  # what the fix removes: call site | reads | statement | setting | loop | together


@dataclass(frozen=True)
class Phase:
    phase: str  # start-up | main loop | between steps | teardown
    start_ns: int
    end_ns: int
    duration_ms: float | None
    intervals: int
    gpu_idle_ms: float | None
    gpu_idle_pct: float | None
    sync_count: int
    host_wait_ms: float | None


@dataclass(frozen=True)
class WhatIfFacts:
    replayed_step_ms: float | None
    unprofiled_step_ms: float | None
    host_scale: float
    calibrated: bool
    calibrated_step_ms: float | None
    predicted_step_ms_without_syncs: float | None
    launch_latency_us: float
    replayed_steps: list[int]
    sites_left_out: int
    note: str
    saving_ms_all_syncs_low: float | None = None  # the likely range of saving_ms_all_syncs
    saving_ms_all_syncs_high: float | None = None
    calibration_held: bool = False  # calibrated by a run the replay can explain (False: set aside, or none)

    @property
    def saving_ms_all_syncs(self) -> float | None:
        return _less(self.unprofiled_step_ms, self.predicted_step_ms_without_syncs)


@dataclass(frozen=True)
class PerStep:
    """One value per analysed step, numbered from 1 over all the steps found (the warm-up included)."""

    number: list[int]
    host_ns: list[int]
    gpu_ns: list[int | None]  # None: no GPU work launched in the step
    gpu_idle_ns: list[int]
    exposed_idle_ns: list[int]


@dataclass(frozen=True)
class Analysis:
    """What ``nsync analyze`` found in one trace: the facts every output shows, and (``tables``) the syncs and
    call sites behind them where the analysis ran here."""

    SCHEMA: ClassVar[str] = SCHEMA
    READS: ClassVar[tuple[str, ...]] = ("nsync.analysis/1", SCHEMA)  # /1: warnings as text, no GPU time binned

    schema: str
    status: Status
    trace: TraceFacts
    steps: StepFacts
    window: Window
    totals: Totals
    verdict: VerdictFacts | None
    phases: list[Phase]
    callsites: list[CallSite]
    outside_main_loop: list[OnceSite]
    what_if: WhatIfFacts | None
    warnings: list[Notice]
    config: AnalysisConfig
    per_step: PerStep | None = None
    timeline: Timeline | None = None
    read_together: list[ReadTogether] = dataclasses.field(default_factory=list)
    fixed_together: list[FixedTogether] = dataclasses.field(default_factory=list)
    tables: AnalysisTables | None = dataclasses.field(default=None, repr=False, compare=False, metadata=NOT_IN_JSON)
    # no figure below is written out: each is derived from those above

    @property
    def gpu_idle_ms_per_step(self) -> float | None:
        count, idle = self.steps.count, self.totals.gpu_idle_ms
        return idle / count if count and idle is not None else None

    @property
    def exposed_idle_ms_per_step(self) -> float | None:
        count, exposed = self.steps.count, self.totals.exposed_idle_ms
        return exposed / count if count and exposed is not None else None

    @property
    def threshold_pct(self) -> float:
        return threshold_pct(self.config)

    def step_ms_if_fixed(self, site: CallSite) -> float | None:
        """The predicted unprofiled step with ``site``'s syncs fixed."""
        unprofiled = self.what_if.unprofiled_step_ms if self.what_if else None
        return _less(unprofiled, site.predicted_saving_ms_per_step)

    def step_ms_if_read_together(self, group: ReadTogether) -> float | None:
        """The predicted unprofiled step with ``group``'s reads made one."""
        unprofiled = self.what_if.unprofiled_step_ms if self.what_if else None
        return _less(unprofiled, group.predicted_saving_ms_per_step)

    def step_ms_if_fixed_together(self, group: FixedTogether) -> float | None:
        """The predicted unprofiled step with ``group``'s syncs removed by its one fix."""
        unprofiled = self.what_if.unprofiled_step_ms if self.what_if else None
        return _less(unprofiled, group.predicted_saving_ms_per_step)

    def step_ms_if_loop_at_once(self, site: CallSite) -> float | None:
        """The predicted unprofiled step with the loop of reads ``site`` is in done for all its items at once."""
        unprofiled = self.what_if.unprofiled_step_ms if self.what_if else None
        return _less(unprofiled, site.loop_saving_ms_per_step)

    def loops_at_once(self, sites: list[CallSite]) -> list[tuple[CallSite, list[CallSite]]]:
        """Each loop of reads among ``sites`` once: its first site and all its sites."""
        loops: dict[int, list[CallSite]] = {}
        for site in sites:
            if site.loop_id is not None:
                loops.setdefault(site.loop_id, []).append(site)
        return [(members[0], members) for members in loops.values()]

    def library_frames(self, sites: list[CallSite] | list[OnceSite]) -> bool:
        """Whether any of ``sites`` is issued by a library (the renderers then show where)."""
        return any(site.issued_at for site in sites)

    def to_dict(self) -> dict[str, Any]:
        """The JSON's content (schema ``nsync.analysis/2``): the facts, not the tables."""
        return plain(self)

    def __repr__(self) -> str:
        """One line, the verdict (a notebook shows the report itself: nsync registers it as the HTML)."""
        said = self.verdict.text if self.verdict is not None else f"status {self.status}, no verdict"
        return f"<nsync.Analysis of {Path(self.trace.path).name}: {said}>"

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Analysis:
        """A result that ``nsync analyze --json`` wrote. Anything else is a one-line error (nsync.jsonfile)."""
        return load_typed(cls, path, "an nsync result")
