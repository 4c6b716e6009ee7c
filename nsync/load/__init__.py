"""Stage 1: read a trace into a :class:`Trace`, whichever profiler wrote it. This module tells the formats
apart (nsync.load.files, by the file's first bytes) and hands the file to that format's reader: an nsys SQLite
export (nsync.load.nsys) or a torch.profiler Chrome trace (nsync.load.kineto). Both fill the same columns, in
nsync's own words (nsync.load.model)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nsync.load.dispatch import load_trace, split_processes
    from nsync.load.model import CallsiteSource, Frame, Stack, StackTable, Trace, thread_labels
    from nsync.load.nsys import sqlite_file

# Each name loads on first use: a command that only names a trace file (nsync.load.files) must not pay for
# pandas before it has looked at the path
_LAZY = {
    "load_trace": "nsync.load.dispatch",
    "split_processes": "nsync.load.dispatch",
    "CallsiteSource": "nsync.load.model",
    "Frame": "nsync.load.model",
    "Stack": "nsync.load.model",
    "StackTable": "nsync.load.model",
    "Trace": "nsync.load.model",
    "thread_labels": "nsync.load.model",
    "sqlite_file": "nsync.load.nsys",
}
__all__ = [
    "CallsiteSource",
    "Frame",
    "Stack",
    "StackTable",
    "Trace",
    "load_trace",
    "split_processes",
    "sqlite_file",
    "thread_labels",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = globals()[name] = getattr(importlib.import_module(_LAZY[name]), name)
        return value
    raise AttributeError(f"module 'nsync.load' has no attribute {name!r}")
