"""Warnings and notes as data: each has a code that code tests (the gates, the verdict) and a message that people
read. Nothing in nsync searches a message for words."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

NoticeCode = Literal[
    # the trace as read (nsync.load)
    "trace-cut",  # read for the part of its time that fits in memory
    "trace-chosen",  # a folder of torch.profiler traces: which one was read
    "export-version",  # an export schema this nsync was not checked on
    "tables-disagree",  # calls without kernels, kernels without calls, nameless calls
    "devices-disagree",  # syncs on devices that ran no GPU work
    "rows-set-aside",  # rows that cannot be true
    "not-utf8",  # strings that are not valid UTF-8
    "python-frames",  # no Python line, and how to capture it
    "damaged-frames",  # Python backtraces that cannot be read
    "kineto-trace",  # a torch.profiler trace without what the figures need (CUDA activity)
    "python-lines",  # a torch.profiler trace whose program files are not readable: lines are functions' first
    # the analysis
    "no-cuda",  # nothing to attribute: no CUDA activity, no GPU work, or none in the chosen window
    "processes-pooled",  # several processes' figures pooled
    "data-loader",  # a loop whose host thread waits for its DataLoader: bound by data loading, not the host's speed
    "uncalibrated",  # a calibration that has no timings of these steps
    "replay-skipped",  # no what-if: why
    "sites-not-replayed",  # some call sites' savings unknown
    "replay-slower",  # a replay that lengthened the step by releasing a wait: that saving shown as none
    "syncs-outside-window",  # syncs the figures leave out
    # nsync ranks
    "collectives-unpaired",
    "no-collectives",
    # a result read back from a file written before warnings had codes
    "unknown",
]


@dataclass(frozen=True)
class Notice:
    """A warning or a note: ``code`` says what it is about, ``message`` says it in one line."""

    code: NoticeCode
    message: str

    def __str__(self) -> str:
        return self.message
