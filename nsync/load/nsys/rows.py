"""Rows that cannot be true, set aside before any figure is computed from them.

An export can be damaged or edited: times NULL or not integers (read as -1), intervals that end before they
start, ops that lie outside the capture or start before the call that launched them, rows written twice,
GPU ops on a device id below zero. Such a row is left out of every figure, counted, and named in a warning
that says which figures it touches; when a table has more of them than ``MAX_SHARE`` of its rows, the
figures would mean nothing and the trace is refused (one line, exit 1). Every check is a comparison over
whole columns: no loop per row, and no sort beyond the ones the loader makes anyway.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from nsync.errors import TraceError
from nsync.notices import Notice

MAX_SHARE = 0.2  # more impossible rows than this in a table: refused
CAPTURE_SLACK_NS = 1_000_000  # rows may end this far past the capture's recorded stop (its last flush)
LAUNCH_SLACK_NS = 10_000  # a GPU op starts >= 3.5 µs after its launch call began in every real export here

GPU_FIGURES = "GPU busy and idle, exposed idle and the what-if leave them out"
API_FIGURES = "their syncs are not counted, and the host's lead and the what-if leave them out"
RANGE_FIGURES = "steps are found without them"


@dataclass(frozen=True)
class SetAside:
    """One kind of impossible row in one table: how many, and the sentence that says so."""

    table: str
    rows: int
    of: int
    why: str
    figures: str

    def warning(self) -> Notice:
        return Notice(
            "rows-set-aside", f"set aside {self.rows} of {self.of} {self.table} that {self.why}: {self.figures}."
        )


def check_gpu_ops(ops: pd.DataFrame, span: tuple[int, int] | None) -> tuple[np.ndarray, list[SetAside]]:
    """Which GPU ops to keep (a mask), and what was set aside. ``ops`` are in start order (the loader's)."""
    start, end = ops["start"].to_numpy(np.int64), ops["end"].to_numpy(np.int64)
    checks = {
        "have no time, or one that is no integer": (start <= 0) | (end <= 0),  # nsys's own gap rule skips 0 too
        "end before they start": end < start,
        "lie outside the capture": _outside(start, end, span),
        "start before the call that launched them": start < ops["launch_start"].to_numpy(np.int64) - LAUNCH_SLACK_NS,
        "run on no device (a device id below zero)": ops["device_id"].to_numpy(np.int64) < 0,
        REPEATED: _repeated_neighbours(ops, ["start", "end", "global_pid", "device_id", "stream_id", "correlation_id"]),
    }
    return _kept("GPU ops", checks, len(ops), GPU_FIGURES)


def check_api(
    api: pd.DataFrame, span: tuple[int, int] | None, repeated: np.ndarray
) -> tuple[np.ndarray, list[SetAside]]:
    """Which CUDA calls to keep, and what was set aside. ``repeated``: calls whose (process, correlationId)
    an earlier call has already (the loader's join finds them)."""
    start, end = api["start"].to_numpy(np.int64), api["end"].to_numpy(np.int64)
    checks = {
        "have no time, or one that is no integer": (start < 0) | (end < 0),
        "end before they start": end < start,
        "lie outside the capture": _outside(start, end, span),
        REPEATED: repeated,
    }
    return _kept("CUDA calls", checks, len(api), API_FIGURES)


def check_ranges(ranges: pd.DataFrame) -> tuple[np.ndarray, list[SetAside]]:
    start, end = ranges["start"].to_numpy(np.int64), ranges["end"].to_numpy(np.int64)
    checks = {"have no time, or end before they start": (start < 0) | (end < start)}
    return _kept("NVTX ranges", checks, len(ranges), RANGE_FIGURES, refuse=False)  # steps have other sources


def _outside(start: np.ndarray, end: np.ndarray, span: tuple[int, int] | None) -> np.ndarray:
    if span is None:
        return np.zeros(len(start), bool)
    return (start < span[0] - CAPTURE_SLACK_NS) | (end > span[1] + CAPTURE_SLACK_NS)


def _repeated_neighbours(frame: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """Rows equal in ``columns`` to the row before them (rows in start order: a row written twice lands next
    to its twin)."""
    repeated = np.zeros(len(frame), bool)
    if len(frame) > 1:
        same = np.ones(len(frame) - 1, bool)
        for column in columns:
            values = frame[column].to_numpy()
            same &= values[1:] == values[:-1]
        repeated[1:] = same
    return repeated


REPEATED = "are written twice"  # a copy of a row: leaving it out leaves the trace as it was, however many


def _kept(
    table: str, checks: dict[str, np.ndarray], rows: int, figures: str, refuse: bool = True
) -> tuple[np.ndarray, list[SetAside]]:
    """The rows no check rejects, and a SetAside per check that rejected some (each row counted once, for the
    first check it fails); with ``refuse``, a TraceError past MAX_SHARE of the rows."""
    keep = np.ones(rows, bool)
    found = []
    for why, bad in checks.items():
        fresh = int((bad & keep).sum())
        if fresh:
            found.append(SetAside(table, fresh, rows, why, figures))
            keep &= ~bad
    dropped = rows - int(keep.sum()) - sum(s.rows for s in found if s.why == REPEATED)
    if refuse and rows and dropped > MAX_SHARE * rows:
        reasons = "; ".join(f"{s.rows} {s.why}" for s in found)
        raise TraceError(
            f"{dropped} of {rows} {table} cannot be true ({reasons}): too many for the figures to mean anything "
            "(a damaged or edited export?)"
        )
    return keep, found
