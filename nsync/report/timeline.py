"""The timeline excerpt as the HTML report draws it: a slice of the trace around representative steps, as
columns, with the GPU's time binned (nsync.stages.excerpt computes every figure here)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


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
class ExposedSpans(Intervals):
    """The GPU's idle spans inside a sync's exposed-idle window, each with that sync (an index into the
    timeline's syncs: the window that began last)."""

    start_ns: list[int] = dataclasses.field(default_factory=list)
    end_ns: list[int] = dataclasses.field(default_factory=list)
    sync: list[int] = dataclasses.field(default_factory=list)


@dataclass(frozen=True)
class GpuUtilisation:
    """The GPUs' time in equal bins of a span: the share busy, the share idle inside a sync's exposed-idle
    window, and that sync (the one holding most of the bin's exposed idle; -1: none). A chart a pixel wide
    per bin shows each pixel as it is, where a bar per kernel would round each microsecond up to a pixel."""

    edges_ns: list[int]  # bins + 1 edges
    busy: list[float]  # share of the bin, over all GPUs (2 GPUs busy half the bin each: 0.5)
    exposed: list[float]
    sync: list[int]


@dataclass(frozen=True)
class Timeline:
    """A slice of the trace around representative steps, for the HTML report to draw."""

    start_ns: int
    end_ns: int
    description: str
    median_step_ns: list[int] | None  # [start, end] of the median-length step, inside the slice
    ops: TimelineOps
    calls: TimelineCalls
    syncs: TimelineSyncs
    lead: TimelineLead
    # the GPU's time binned (nsync.stages.activity; a result saved by nsync.analysis/1 has none, its page no GPU band)
    exposed: ExposedSpans = dataclasses.field(default_factory=ExposedSpans)
    utilisation: GpuUtilisation | None = None  # the whole slice
    step_utilisation: GpuUtilisation | None = None  # the median step
