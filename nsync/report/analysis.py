"""The report model: every figure a renderer prints, built once from an analysis.

The JSON output (schema ``nsync.analysis/1``) is this model written out, and :func:`read_report` reads it
back, so that a saved result can be rendered again (``nsync analyze --from result.json``). Renderers take a
:class:`Report` and only print it: the figures derived from others (per step, shares, what a fix leaves)
are computed here, in the model's properties, and nowhere else. Times are in the unit their name says.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from nsync.config import AnalysisConfig
from nsync.report.typed import read_typed
from nsync.stages.advice import Advice, Reads
from nsync.stages.replay import saving_range

if TYPE_CHECKING:
    from nsync.analysis import Analysis
    from nsync.stages.excerpt import TimelineExcerpt

SCHEMA = "nsync.analysis/1"
NS_PER_MS = 1e6


def ns_to_ms(value_ns: float | None) -> float | None:
    if value_ns is None or (isinstance(value_ns, float) and math.isnan(value_ns)):
        return None
    return round(float(value_ns) / NS_PER_MS, 6)


def _num(value: float | None) -> float | None:
    return None if value is None or math.isnan(float(value)) else round(float(value), 4)


def _pct(part: float, whole: float) -> float | None:
    return round(100 * part / whole, 2) if whole else None


def _less(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def threshold_pct(config: AnalysisConfig) -> float:
    """The saving, as a share of the step, from which a sync is worth fixing."""
    return round(100 * config.worth_fixing_share, 2)


def where(file: str, line: int | None) -> str:
    """``file.py:12``: the file's name and the line."""
    return f"{str(file).rsplit('/', 1)[-1]}:{line}"


@dataclass(frozen=True)
class TraceFacts:
    path: str
    nsys_version: str | None
    export_schema_version: str | None
    gpus: list[str]


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
    text: str
    worth_fixing: bool
    largest_saving_ms_per_step: float | None
    share_pct: float
    site: str
    all_syncs_together: bool
    threshold_pct: float
    largest_saving_ms_per_step_low: float | None = None  # its likely range (AnalysisConfig.saving_ratio)
    largest_saving_ms_per_step_high: float | None = None
    measure: bool = False  # the range straddles the threshold: neither worth fixing nor not, until measured


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
class SyncFrame:
    """Where the sync is issued: the innermost frame outside PyTorch (a library's line, or the call site)."""

    file: str
    line: int
    function: str


@dataclass(frozen=True)
class StackFrame:
    function: str
    file: str
    line: int


class Site:
    """A call site's two frames: the user's line (file, line, function), and where the sync is issued."""

    file: str
    line: int
    function: str
    sync_frame: SyncFrame

    @property
    def where(self) -> str:
        return where(self.file, self.line)

    @property
    def issued_at(self) -> str:
        """Where a library issues the sync (``trainer.py:1847``); empty when that is the call site itself."""
        frame = self.sync_frame
        return "" if (frame.file, frame.line) == (self.file, self.line) else where(frame.file, frame.line)


@dataclass(frozen=True)
class CallSite(Site):
    file: str
    line: int
    function: str
    sync_frame: SyncFrame
    count: int
    syncs_per_step: float | None
    executions_per_step: float | None
    exposed_idle_ms: float | None
    exposed_idle_ms_per_step: float | None
    host_wait_ms: float | None
    host_wait_ms_per_step: float | None
    lead_before_ms_mean: float | None
    share_of_gpu_idle: float | None
    apis: list[str]
    kinds: list[str]
    copy_directions: list[str]
    stack: list[StackFrame]
    predicted_saving_ms_per_step: float | None
    callsite_source: str
    short_hint: str
    hint: str
    advice: Advice | None = None  # the fix, from the code (None: the hint, from the sync's kind, is all there is)
    predicted_saving_ms_per_step_low: float | None = None  # the saving's likely range (AnalysisConfig.saving_ratio)
    predicted_saving_ms_per_step_high: float | None = None
    # a read in a loop of reads (the replay found it): which loop (a loop's sites share it), and what doing the
    # loop's work for all items at once saves
    loop_id: int | None = None
    loop_saving_ms_per_step: float | None = None
    loop_saving_ms_per_step_low: float | None = None
    loop_saving_ms_per_step_high: float | None = None

    @property
    def saving_range_ms(self) -> tuple[float | None, float | None]:
        return self.predicted_saving_ms_per_step_low, self.predicted_saving_ms_per_step_high

    @property
    def loop_saving_range_ms(self) -> tuple[float | None, float | None]:
        return self.loop_saving_ms_per_step_low, self.loop_saving_ms_per_step_high


@dataclass(frozen=True)
class ReadTogether(Reads):
    """Value reads on several lines of one step that one copy would do: the lines, the rewrite as line edits,
    and what fixing them together is predicted to save per step."""

    predicted_saving_ms_per_step: float | None
    predicted_saving_ms_per_step_low: float | None = None
    predicted_saving_ms_per_step_high: float | None = None

    @property
    def saving_range_ms(self) -> tuple[float | None, float | None]:
        return self.predicted_saving_ms_per_step_low, self.predicted_saving_ms_per_step_high

    @property
    def where(self) -> str:
        return f"{Path(self.file).name}:{','.join(map(str, self.lines))}"


@dataclass(frozen=True)
class OnceSite(Site):
    """A call site of syncs outside the main loop (start-up, between steps, teardown)."""

    phase: str
    file: str
    line: int
    function: str
    sync_frame: SyncFrame
    count: int
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


class Intervals:
    """Columns of intervals (start_ns, end_ns)."""

    start_ns: list[int]
    end_ns: list[int]

    @property
    def duration_ns(self) -> list[int]:
        return [end - start for start, end in zip(self.start_ns, self.end_ns)]


@dataclass(frozen=True)
class TimelineOps(Intervals):
    start_ns: list[int]
    end_ns: list[int]
    lane: list[str]  # "GPU 0 · stream 7"
    op: list[str]  # kernel | memcpy | memset | graph
    name: list[str]  # the kernel's name, else the op
    device: list[int] = dataclasses.field(default_factory=list)  # (results saved before it: all one GPU)


@dataclass(frozen=True)
class TimelineCalls(Intervals):
    start_ns: list[int]
    end_ns: list[int]
    thread: list[str]  # "MainThread (4242)"
    api: list[str]


@dataclass(frozen=True)
class TimelineSyncs(Intervals):
    start_ns: list[int]
    end_ns: list[int]
    thread: list[str]
    kind: list[str]
    exposed_start_ns: list[int]  # the GPU idles from here (the sync drained its queue) until rebuild_ns
    rebuild_ns: list[int]
    exposed_idle_ns: list[int]
    where: list[str]  # "file.py:12"
    function: list[str]

    @property
    def exposed_window_ns(self) -> list[int]:
        return [end - start for start, end in zip(self.exposed_start_ns, self.rebuild_ns)]


@dataclass(frozen=True)
class TimelineLead:
    t_ns: list[int]
    lead_ns: list[int]
    thread: list[str]


@dataclass(frozen=True)
class GpuActivity:
    """Each GPU's time in the timeline's slice, in order: busy (the union of its ops) or idle, an idle span
    with the sync whose exposed-idle window holds it (the window that began last; -1: no sync's)."""

    device: list[int]
    start_ns: list[int]
    end_ns: list[int]
    busy: list[bool]
    sync: list[int]  # an index into the timeline's syncs, or -1


@dataclass(frozen=True)
class GpuUtilisation:
    """The GPUs' time in equal bins of the slice: the share busy, the share idle inside a sync's exposed-idle
    window, and that sync (the one holding most of the bin's exposed idle; -1: none). A chart a pixel wide
    per bin shows each pixel as it is, where a bar per kernel would round each microsecond up to a pixel."""

    edges_ns: list[int]  # bins + 1 edges
    busy: list[float]  # share of the bin, over all GPUs (2 GPUs busy half the bin each: 0.5)
    exposed: list[float]
    sync: list[int]


@dataclass(frozen=True)
class Timeline:
    """A slice of the trace around representative steps (nsync.stages.excerpt), for the HTML report to draw."""

    start_ns: int
    end_ns: int
    description: str
    median_step_ns: list[int] | None  # [start, end] of the median-length step, inside the slice
    ops: TimelineOps
    calls: TimelineCalls
    syncs: TimelineSyncs
    lead: TimelineLead

    def gpu_activity(self) -> GpuActivity:
        """Where each GPU was busy and where it idled, and which sync's window each idle span lies in."""
        start = np.asarray(self.ops.start_ns, np.int64)
        end = np.asarray(self.ops.end_ns, np.int64)
        device = np.asarray(self.ops.device or [0] * len(start), np.int64)
        windows = (np.asarray(self.syncs.exposed_start_ns, np.int64), np.asarray(self.syncs.rebuild_ns, np.int64))
        columns: list[list[int]] = [[], [], [], [], []]  # device, start, end, busy, sync
        for gpu in np.unique(device):  # a few GPUs at most
            spans = _device_activity(start[device == gpu], end[device == gpu], self.start_ns, self.end_ns, windows)
            columns[0] += [int(gpu)] * len(spans[0])
            for column, values in zip(columns[1:], spans):
                column += values.tolist()
        return GpuActivity(columns[0], columns[1], columns[2], [bool(b) for b in columns[3]], columns[4])

    def gpu_utilisation(
        self, bins: int = 1500, first_ns: int | None = None, last_ns: int | None = None
    ) -> GpuUtilisation:
        """:class:`GpuActivity` in ``bins`` equal bins over [first_ns, last_ns] (default: the slice)."""
        first_ns = self.start_ns if first_ns is None else first_ns
        last_ns = self.end_ns if last_ns is None else last_ns
        activity = self.gpu_activity()
        edges = np.linspace(first_ns, last_ns, bins + 1).round().astype(np.int64)
        start, end = np.asarray(activity.start_ns, np.int64), np.asarray(activity.end_ns, np.int64)
        busy, owner = np.asarray(activity.busy, bool), np.asarray(activity.sync, np.int64)
        gpus = max(len(set(activity.device)), 1)
        width = np.maximum(np.diff(edges), 1) * gpus

        def share(chosen: np.ndarray) -> np.ndarray:
            """Per bin, the time of the chosen spans inside it: a difference of the running total's values."""
            s, e = start[chosen], end[chosen]
            points = np.concatenate([s, e])
            order = np.argsort(points, kind="stable")
            slope = np.concatenate([np.ones(len(s)), -np.ones(len(e))])[order].cumsum()  # spans open after each
            at = points[order]
            covered = np.concatenate([[0.0], np.cumsum(slope[:-1] * np.diff(at))]) if len(at) else np.zeros(0)
            total = np.interp(edges, at, covered) if len(at) else np.zeros(len(edges))
            return np.clip(np.diff(total) / width, 0.0, 1.0)

        exposed = ~busy & (owner >= 0)
        return GpuUtilisation(
            edges_ns=edges.tolist(),
            busy=np.round(share(busy), 4).tolist(),
            exposed=np.round(share(exposed), 4).tolist(),
            sync=_bin_syncs(edges, start[exposed], end[exposed], owner[exposed]).tolist(),
        )


def _bin_syncs(edges: np.ndarray, start: np.ndarray, end: np.ndarray, owner: np.ndarray) -> np.ndarray:
    """Each bin's sync: that of the exposed span over the bin's middle, else of the longest one that ends or
    begins inside it (-1: none)."""
    bins = len(edges) - 1
    found = np.full(bins, -1, np.int64)
    if not len(start):
        return found
    order = np.argsort(start, kind="stable")
    start, end, owner = start[order], end[order], owner[order]
    middle = (edges[:-1] + edges[1:]) // 2
    k = np.searchsorted(start, middle, side="right") - 1
    over = (k >= 0) & (end[np.maximum(k, 0)] > middle)
    found[over] = owner[k[over]]
    bin_of = np.clip(np.searchsorted(edges, (start + end) // 2, side="right") - 1, 0, bins - 1)
    by = np.lexsort((end - start, bin_of))  # by bin, the longest last
    last = np.r_[np.flatnonzero(np.diff(bin_of[by])), len(by) - 1]
    chosen_bins, chosen_owner = bin_of[by][last], owner[by][last]
    empty = found[chosen_bins] < 0
    found[chosen_bins[empty]] = chosen_owner[empty]
    return found


def _device_activity(
    start: np.ndarray, end: np.ndarray, first_ns: int, last_ns: int, windows: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, busy, sync) spans of one GPU over [first_ns, last_ns] (see Timeline.gpu_activity)."""
    order = np.argsort(start, kind="stable")
    start, end = start[order], end[order]
    reach = np.maximum.accumulate(end) if len(end) else end
    new = np.ones(len(start), bool)
    new[1:] = start[1:] > reach[:-1]
    busy_start = start[new]
    busy_end = reach[np.r_[np.flatnonzero(new)[1:] - 1, len(start) - 1]] if len(start) else reach
    edges = np.concatenate([[first_ns], busy_end])
    ends = np.concatenate([busy_start, [last_ns]])
    keep = ends > edges
    idle_start, idle_end = edges[keep], ends[keep]
    # idle spans cut where a sync's window begins or ends, each piece given the window that began last
    win_start, win_end = windows
    cuts = np.unique(np.concatenate([idle_start, idle_end, win_start, win_end]))
    gap = np.searchsorted(idle_start, cuts[:-1], side="right") - 1
    inside = (gap >= 0) & (cuts[1:] <= idle_end[np.maximum(gap, 0)]) if len(idle_start) else gap >= 0
    piece_start, piece_end = cuts[:-1][inside], cuts[1:][inside]
    owner = _latest_window(piece_start, win_start, win_end)
    # neighbouring pieces of one span and one window are one span again
    joined = np.ones(len(piece_start), bool)
    joined[1:] = (piece_start[1:] != piece_end[:-1]) | (owner[1:] != owner[:-1])
    heads = np.flatnonzero(joined)
    tails = np.r_[heads[1:] - 1, len(piece_start) - 1] if len(heads) else heads
    spans = (
        np.concatenate([busy_start, piece_start[heads]]),
        np.concatenate([busy_end, piece_end[tails]]),
        np.concatenate([np.ones(len(busy_start), np.int64), np.zeros(len(heads), np.int64)]),
        np.concatenate([np.full(len(busy_start), -1), owner[heads]]),
    )
    order = np.argsort(spans[0], kind="stable")
    return spans[0][order], spans[1][order], spans[2][order], spans[3][order]


def _latest_window(at: np.ndarray, win_start: np.ndarray, win_end: np.ndarray) -> np.ndarray:
    """For each time in ``at``, the index of the window holding it that began last (-1: none); in chunks,
    since a slice holds a few thousand pieces and a few hundred windows at most."""
    owner = np.full(len(at), -1, np.int64)
    if not len(win_start):
        return owner
    by_start = np.argsort(win_start, kind="stable")
    starts, ends = win_start[by_start], win_end[by_start]
    for first in range(0, len(at), 4096):
        t = at[first : first + 4096, None]
        holds = (starts[None, :] <= t) & (ends[None, :] > t)
        last = holds.shape[1] - 1 - np.argmax(holds[:, ::-1], axis=1)
        owner[first : first + 4096] = np.where(holds.any(axis=1), by_start[last], -1)
    return owner


@dataclass(frozen=True)
class Report:
    schema: str
    status: str  # ok | no-cuda | no-gpu-work
    trace: TraceFacts
    steps: StepFacts
    window: Window
    totals: Totals
    verdict: VerdictFacts | None
    phases: list[Phase]
    callsites: list[CallSite]
    outside_main_loop: list[OnceSite]
    what_if: WhatIfFacts | None
    warnings: list[str]
    config: AnalysisConfig
    per_step: PerStep | None = None
    timeline: Timeline | None = None
    read_together: list[ReadTogether] = dataclasses.field(default_factory=list)
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


def build_report(analysis: Analysis) -> Report:
    """The report of ``analysis``, with every call site (renderers show the first ``top``)."""
    totals = analysis.totals
    stats = analysis.step_stats
    durations = stats["duration_ns"] if len(stats) else None
    gpu_durations = stats["gpu_duration_ns"].dropna() if len(stats) else None
    gpu_idle = totals["gpu_idle_ns"]
    steps = analysis.steps
    return Report(
        schema=SCHEMA,
        status=analysis.status,
        trace=TraceFacts(
            path=analysis.trace_path,
            nsys_version=analysis.nsys_version,
            export_schema_version=analysis.schema_version,
            gpus=list(analysis.gpus),
        ),
        steps=StepFacts(
            count=steps.count,
            median_ms=ns_to_ms(float(durations.median())) if durations is not None else None,
            gpu_median_ms=ns_to_ms(float(gpu_durations.median()))
            if gpu_durations is not None and len(gpu_durations)
            else None,
            source=steps.source,
            total=len(steps.table),
            warmup_skipped=steps.warmup,
            set_aside=steps.set_aside,
            each=_one_step(analysis),
        ),
        window=Window(start_ns=analysis.window_ns[0], end_ns=analysis.window_ns[1]),
        totals=Totals(
            span_ms=ns_to_ms(totals["span_ns"]),
            gpu_count=totals["gpu_count"],
            gpu_idle_ms=ns_to_ms(gpu_idle),
            gpu_busy_ms=ns_to_ms(totals["gpu_busy_ns"]),
            gpu_idle_pct=_pct(gpu_idle, totals["span_ns"] * totals["gpu_count"]),
            per_gpu=[
                GpuIdle(
                    device_id=gpu["device_id"],
                    name=gpu["name"],
                    idle_ms=ns_to_ms(gpu["idle_ns"]),
                    idle_pct=_pct(gpu["idle_ns"], totals["span_ns"]),
                )
                for gpu in totals["per_gpu"]
            ],
            exposed_idle_ms=ns_to_ms(totals["exposed_idle_ns"]),
            host_wait_ms=ns_to_ms(totals["host_wait_ns"]),
            sync_count=totals["sync_count"],
            syncs_outside_window=totals.get("syncs_outside_window", 0),
            predicted_step_ms_without_syncs=ns_to_ms(analysis.what_if.without_syncs_step_ns)
            if analysis.what_if
            else None,
        ),
        verdict=_verdict(analysis),
        phases=_phases(analysis),
        callsites=[_callsite(row, gpu_idle) for row in analysis.callsites.to_dict("records")],
        outside_main_loop=[
            OnceSite(
                **_frames(row), phase=row["phase"], count=int(row["count"]), host_wait_ms=ns_to_ms(row["host_wait_ns"])
            )
            for row in analysis.phase_sites.to_dict("records")
        ],
        what_if=_what_if(analysis),
        warnings=list(analysis.warnings),
        config=analysis.config,
        per_step=_per_step(analysis),
        timeline=timeline_of(analysis),
        read_together=_read_together(analysis),
    )


# transformers' generate() reads whether every sequence has finished once per new token
_GENERATE_FILE = re.compile(r"transformers/generation/(?:utils|stopping_criteria)\.py$")


def _one_step(analysis: Analysis) -> str:
    """What one step is where the trace tells: a step found by its kernel sequence that holds generate()'s
    finished-sequences read once is one decode step, one new token."""
    sites = analysis.callsites
    if not analysis.steps.source.startswith("kernel:") or sites.empty:
        return ""
    generate = sites["sync_file"].astype(str).str.contains(_GENERATE_FILE)
    per_step = sites.loc[generate, "syncs_per_step"]
    return "one new token of generate()" if ((per_step > 0.9) & (per_step < 1.1)).any() else ""


def _read_together(analysis: Analysis) -> list[ReadTogether]:
    savings = analysis.what_if.group_saving_ns if analysis.what_if else ()
    spans = analysis.what_if.group_saving_span_ns if analysis.what_if else ()
    together = []
    for k, group in enumerate(analysis.read_groups):
        saving = savings[k] if k < len(savings) else None
        low, high = _ms_range(spans[k] if k < len(spans) else None, analysis.config)
        together.append(
            ReadTogether(
                **{f.name: getattr(group, f.name) for f in dataclasses.fields(Reads)},
                predicted_saving_ms_per_step=ns_to_ms(saving),
                predicted_saving_ms_per_step_low=low,
                predicted_saving_ms_per_step_high=high,
            )
        )
    return together


def _ms_range(span_ns: tuple[float, float] | None, config: AnalysisConfig) -> tuple[float | None, float | None]:
    """A predicted saving's likely range in ms, from its span over the host scales replayed
    (AnalysisConfig.saving_ratio); (None, None) where it is unknown."""
    if span_ns is None or not all(math.isfinite(end) for end in span_ns):
        return None, None
    low, high = saving_range(*span_ns, config.saving_ratio)
    return ns_to_ms(float(low)), ns_to_ms(float(high))


def _verdict(analysis: Analysis) -> VerdictFacts | None:
    verdict = analysis.verdict
    if verdict is None:
        return None
    return VerdictFacts(
        text=verdict.text,
        worth_fixing=verdict.worth_fixing,
        largest_saving_ms_per_step=ns_to_ms(verdict.largest_saving_ns),
        largest_saving_ms_per_step_low=ns_to_ms(verdict.low_ns),
        largest_saving_ms_per_step_high=ns_to_ms(verdict.high_ns),
        measure=verdict.measure,
        share_pct=round(100 * verdict.share, 4),  # (text outputs print it to one decimal, as the verdict)
        site=verdict.site,
        all_syncs_together=verdict.together,
        threshold_pct=threshold_pct(analysis.config),
    )


def _phases(analysis: Analysis) -> list[Phase]:
    gpus = max(analysis.totals["gpu_count"], 1)
    return [
        Phase(
            phase=row["phase"],
            start_ns=int(row["start"]),
            end_ns=int(row["end"]),
            duration_ms=ns_to_ms(row["duration_ns"]),
            intervals=int(row["intervals"]),
            gpu_idle_ms=ns_to_ms(row["gpu_idle_ns"]),
            gpu_idle_pct=_pct(row["gpu_idle_ns"], row["duration_ns"] * gpus),
            sync_count=int(row["sync_count"]),
            host_wait_ms=ns_to_ms(row["host_wait_ns"]),
        )
        for row in analysis.phases.to_dict("records")
    ]


def _frames(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "file": row["file"],
        "line": int(row["line"]),
        "function": row["function"],
        "sync_frame": SyncFrame(file=row["sync_file"], line=int(row["sync_line"]), function=row["sync_function"]),
    }


def _what_if(analysis: Analysis) -> WhatIfFacts | None:
    predicted = analysis.what_if
    if predicted is None:
        return None
    low, high = _ms_range(predicted.all_syncs_span_ns, analysis.config)
    return WhatIfFacts(
        replayed_step_ms=ns_to_ms(predicted.replayed_step_ns),
        unprofiled_step_ms=ns_to_ms(predicted.unprofiled_step_ns),
        host_scale=round(predicted.host_scale, 4),
        calibrated=predicted.calibrated,
        calibrated_step_ms=None if predicted.calibrated_step_ns is None else ns_to_ms(predicted.calibrated_step_ns),
        predicted_step_ms_without_syncs=ns_to_ms(predicted.without_syncs_step_ns),
        launch_latency_us=round(predicted.latency_ns / 1e3, 3),
        replayed_steps=list(predicted.replayed_steps),
        sites_left_out=predicted.sites_left_out,
        note=predicted.note,
        saving_ms_all_syncs_low=low,
        saving_ms_all_syncs_high=high,
    )


def _callsite(row: dict[str, Any], gpu_idle_ns: int) -> CallSite:
    return CallSite(
        **_frames(row),
        count=int(row["count"]),
        syncs_per_step=_num(row["syncs_per_step"]),
        executions_per_step=_num(row["executions_per_step"]),
        exposed_idle_ms=ns_to_ms(row["exposed_idle_ns"]),
        exposed_idle_ms_per_step=ns_to_ms(row["exposed_idle_ns_per_step"]),
        host_wait_ms=ns_to_ms(row["host_wait_ns"]),
        host_wait_ms_per_step=ns_to_ms(row["host_wait_ns_per_step"]),
        lead_before_ms_mean=ns_to_ms(row["lead_before_ns_mean"]),
        share_of_gpu_idle=_num(row["exposed_idle_ns"] / gpu_idle_ns) if gpu_idle_ns else None,
        apis=list(row["apis"]),
        kinds=list(row["kinds"]),
        copy_directions=list(row["copy_directions"]),
        stack=[StackFrame(function=f.function, file=f.file, line=f.line) for f in row["stack"]],
        predicted_saving_ms_per_step=ns_to_ms(row.get("predicted_saving_ns_per_step")),
        predicted_saving_ms_per_step_low=ns_to_ms(row.get("predicted_saving_ns_per_step_low")),
        predicted_saving_ms_per_step_high=ns_to_ms(row.get("predicted_saving_ns_per_step_high")),
        loop_id=None if _num(row.get("loop_id")) is None else int(row["loop_id"]),
        loop_saving_ms_per_step=ns_to_ms(row.get("loop_saving_ns_per_step")),
        loop_saving_ms_per_step_low=ns_to_ms(row.get("loop_saving_ns_per_step_low")),
        loop_saving_ms_per_step_high=ns_to_ms(row.get("loop_saving_ns_per_step_high")),
        callsite_source=row["callsite_source"],
        short_hint=row["short_hint"],
        hint=row["hint"],
        advice=row.get("advice"),
    )


def _per_step(analysis: Analysis) -> PerStep | None:
    stats = analysis.step_stats
    if stats.empty:
        return None
    return PerStep(
        number=(np.arange(len(stats)) + analysis.steps.warmup + 1).tolist(),
        host_ns=_ints(stats["duration_ns"]),
        gpu_ns=[None if math.isnan(v) else int(v) for v in stats["gpu_duration_ns"].astype(float).tolist()],
        gpu_idle_ns=_ints(stats["gpu_idle_ns"]),
        exposed_idle_ns=_ints(stats["exposed_idle_ns"]),
    )


def _ints(values: pd.Series) -> list[int]:
    return values.to_numpy(np.int64).tolist()


def timeline_of(analysis: Analysis) -> Timeline | None:
    """The report's timeline of ``analysis`` (None without an excerpt), for a diff that needs only that."""
    return None if analysis.timeline is None else _timeline(analysis.timeline, analysis)


def _timeline(excerpt: TimelineExcerpt, analysis: Analysis) -> Timeline:
    labels = excerpt.thread_labels
    ops, calls, syncs, lead = excerpt.ops, excerpt.calls, excerpt.syncs, excerpt.lead
    k = analysis.steps.median_index()
    median = None if k is None else analysis.steps.analysed.iloc[k]
    kernel_or_op = ops["name"].astype(object).where(ops["name"].notna(), ops["op"].astype(str))
    return Timeline(
        start_ns=excerpt.start_ns,
        end_ns=excerpt.end_ns,
        description=excerpt.description,
        median_step_ns=None if median is None else [int(median["start"]), int(median["end"])],
        ops=TimelineOps(
            start_ns=_ints(ops["start"]),
            end_ns=_ints(ops["end"]),
            lane=[f"GPU {d} · stream {s}" for d, s in zip(ops["device_id"].tolist(), ops["stream_id"].tolist())],
            op=ops["op"].astype(str).tolist(),
            name=[str(name) for name in kernel_or_op.tolist()],
            device=_ints(ops["device_id"]),
        ),
        calls=TimelineCalls(
            start_ns=_ints(calls["start"]),
            end_ns=_ints(calls["end"]),
            thread=[labels[t] for t in calls["global_tid"].tolist()],
            api=calls["api"].astype(str).tolist(),
        ),
        syncs=TimelineSyncs(
            start_ns=_ints(syncs["start"]),
            end_ns=_ints(syncs["end"]),
            thread=[labels[t] for t in syncs["global_tid"].tolist()],
            kind=syncs["kind"].astype(str).tolist(),
            exposed_start_ns=_ints(syncs["exposed_start_ns"]),
            rebuild_ns=_ints(syncs["rebuild_ns"]),
            exposed_idle_ns=_ints(syncs["exposed_idle_ns"]),
            where=[where(f, n) for f, n in zip(syncs["file"].tolist(), syncs["line"].tolist())],
            function=syncs["function"].astype(str).tolist(),
        ),
        lead=TimelineLead(
            t_ns=_ints(lead["t"]),
            lead_ns=_ints(lead["lead_ns"]),
            thread=[labels[t] for t in lead["global_tid"].tolist()],
        ),
    )


def as_report(source: Report | Analysis) -> Report:
    """Renderers take a report; given an analysis, they build its report first."""
    return source if isinstance(source, Report) else build_report(source)


def report_to_dict(report: Report) -> dict[str, Any]:
    return asdict(report)


def read_report(path: Path) -> Report:
    """A result that ``nsync analyze --json`` wrote. Anything else is a one-line error (nsync.jsonfile)."""
    return read_typed(Report, path, SCHEMA, "an nsync result")
