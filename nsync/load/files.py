"""The trace files themselves: which profiler wrote one (told by its first bytes, not its name), whether it can
be read at all, and the name the outputs written beside it take."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from nsync.errors import TraceError, UsageError

Profiler = Literal["nsys", "torch.profiler"]  # what wrote a trace

GZIP_MAGIC = b"\x1f\x8b"


TORCH_TRACES = ("*.pt.trace.json", "*.pt.trace.json.gz")  # what torch.profiler's tensorboard_trace_handler writes


def newest_torch_trace(folder: Path) -> tuple[Path, int] | None:
    """The newest torch.profiler trace in ``folder`` (a tensorboard_trace_handler's: one per profiled window and
    worker), and how many there are; None where it holds none."""
    found = [p for pattern in TORCH_TRACES for p in folder.glob(pattern) if p.is_file()]
    if not found:
        return None
    return max(found, key=lambda p: (p.stat().st_mtime_ns, p.name)), len(found)


def profiler_of(path: Path) -> Profiler:
    """``torch.profiler`` for a Chrome-trace JSON (a ``{``, or gzip: no nsys export is gzip-compressed, so a
    damaged one is said by the JSON reader), else ``nsys`` (an SQLite export, or its .xz)."""
    try:
        with path.open("rb") as handle:
            head = handle.read(64)
    except OSError:
        return "nsys"
    json = head.lstrip().startswith((b"{", b"["))  # (a Chrome trace may be an array: its reader says what is wrong)
    return "torch.profiler" if head.startswith(GZIP_MAGIC) or json else "nsys"


def require_file(path: Path) -> None:
    """A one-line error for a path that is no readable file: missing or a folder (usage, exit 2), or
    unreadable (exit 1)."""
    if path.is_dir():
        raise UsageError(
            f"{path}: is a folder, not a trace (give an nsys .sqlite export or .nsys-rep, a torch.profiler trace, "
            "or the folder of tensorboard_trace_handler's traces)"
        )
    if not path.is_file():
        if path.exists():  # a pipe, a socket or a device: nothing nsync can read twice
            raise UsageError(f"{path}: not a regular file (give the .sqlite export or .nsys-rep)")
        raise UsageError(f"{path}: no such file")
    if not os.access(path, os.R_OK):
        raise TraceError(f"{path}: cannot read (permission denied)")


# the names of what nsync profile writes, and of the traces nsync reads: NAME then one of these
TRACE_SUFFIXES = (".sqlite.xz", ".sqlite", ".nsys-rep", ".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json")


def trace_stem(trace: Path) -> str:
    """A trace's name without its suffix (``run.sqlite``, ``run.pt.trace.json.gz``: ``run``), as the outputs
    written beside it are named."""
    name = trace.name
    for suffix in TRACE_SUFFIXES:
        if name.endswith(suffix):
            return name.removesuffix(suffix)
    return trace.stem
