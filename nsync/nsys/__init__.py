"""Stage 0: locate and drive a real nsys (profile, import, export)."""

from nsync.nsys.capture import (
    CaptureOptions,
    CaptureResult,
    NsysFailedFirst,
    WindowNeverOpened,
    profile_flags,
    run_capture,
)
from nsync.nsys.export import export_sqlite, exported
from nsync.nsys.locate import Nsys, find_nsys

__all__ = [
    "CaptureOptions",
    "CaptureResult",
    "Nsys",
    "NsysFailedFirst",
    "WindowNeverOpened",
    "export_sqlite",
    "exported",
    "find_nsys",
    "profile_flags",
    "run_capture",
]
