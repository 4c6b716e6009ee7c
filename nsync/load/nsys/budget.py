"""Decide, before reading, whether a trace fits in memory, and which part of it to read when it does not.

The row counts come from each table's largest rowid (no scan). The costs are the largest measured on five
real H200 captures tiled to 1-10 M rows (``benchmarks/tile_trace.py``): peak RSS was 52-113 bytes per row
above the interpreter and libraries' 110 MiB, and 176 at 1 M rows, where the what-if replay's fixed cost
shows. Traces with many syncs cost the most per row. A trace that would not fit is read for the first part
of its time span that does, with a warning, instead of being killed by the kernel part way.
"""

from __future__ import annotations

from pathlib import Path

from nsync.errors import NsyncError, UsageError
from nsync.load.nsys.db import ExportDb
from nsync.settings import setting

BASE_BYTES = 180 << 20
BYTES_PER_ROW = 110
SAFETY = 0.85  # of the available memory, the share a load may plan to use
NO_END = 2**62  # the end of a window open to the end of the capture
BIG_TABLES = (
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "NVTX_EVENTS",
)


def estimated_peak_bytes(rows: int) -> int:
    return BASE_BYTES + BYTES_PER_ROW * rows


def available_memory_bytes() -> int | None:
    """What this process may still use: the kernel's MemAvailable, capped by a cgroup v2 limit."""
    limits = []
    try:
        meminfo = Path("/proc/meminfo").read_text().splitlines()
        limits += [int(line.split()[1]) * 1024 for line in meminfo if line.startswith("MemAvailable:")]
    except (OSError, ValueError, IndexError):
        pass
    try:
        cgroup = Path("/sys/fs/cgroup")
        limit = (cgroup / "memory.max").read_text().strip()
        if limit != "max":
            limits.append(int(limit) - int((cgroup / "memory.current").read_text()))
    except (OSError, ValueError):
        pass
    return min(limits) if limits else None


def plan_window(
    db: ExportDb,
    span_ns: tuple[int, int] | None,
    window_s: tuple[float, float | None] | None,
    budget_bytes: int | None,
) -> tuple[tuple[int, int] | None, str | None]:
    """The time window to read (None: all of it) and a warning when it had to be cut to fit in memory.

    ``window_s`` is the user's choice, in seconds from the capture's start; ``budget_bytes`` defaults to
    the memory available now.
    """
    origin = span_ns[0] if span_ns else 0
    window = None
    if window_s is not None and span_ns is not None and window_s[0] * 1e9 >= span_ns[1] - span_ns[0]:
        length_s = (span_ns[1] - span_ns[0]) / 1e9
        raise UsageError(
            f"{setting('AnalysisConfig.window_s')} starts at {window_s[0]:.3f} s, after the capture's end: it spans "
            f"0.000-{length_s:.3f} s (in seconds from its start)"
        )
    if window_s is not None:
        end = NO_END if window_s[1] is None else origin + int(window_s[1] * 1e9)
        window = (origin + int(window_s[0] * 1e9), end)
    budget = budget_bytes if budget_bytes is not None else available_memory_bytes()
    if budget is None or span_ns is None:
        return window, None
    if budget * SAFETY <= BASE_BYTES:
        amount = f"{budget / 2**20:.0f} MiB" if budget >= 2**20 else f"{budget:,} bytes"
        needs = f"nsync needs about {BASE_BYTES / 2**20 / SAFETY:.0f} MiB before it reads any trace"
        if budget_bytes is not None:  # the user's own limit: a usage error, said with the setting
            raise UsageError(f"{amount} of memory allowed ({setting('AnalysisConfig.max_memory_bytes')}): {needs}")
        raise NsyncError(f"{amount} of memory available: {needs}")
    start, stop = window or span_ns
    stop = min(stop, span_ns[1])
    span_share = max(0.0, min(1.0, (stop - start) / max(span_ns[1] - span_ns[0], 1)))
    rows = int(sum(db.capacity(table) for table in BIG_TABLES) * span_share)
    needed, usable = estimated_peak_bytes(rows), int(budget * SAFETY)
    if needed <= usable:
        return window, None
    share = max(0.0, (usable - BASE_BYTES) / (needed - BASE_BYTES))
    cut = (start, start + int((stop - start) * share))
    return cut, (
        f"this trace needs about {needed / 2**30:.1f} GiB to analyse and {budget / 2**30:.1f} GiB "
        f"{'are allowed' if budget_bytes is not None else 'are available'}: analysing only "
        f"{(cut[0] - origin) / 1e9:.3f}-{(cut[1] - origin) / 1e9:.3f} s of its "
        f"{(span_ns[1] - span_ns[0]) / 1e9:.3f} s "
        f"(choose the part with {setting('AnalysisConfig.window_s')}, in seconds)"
    )
