"""The program run under a real nsys: its flags and its run (capture.py), a hang told from a slow start (hang.py),
what a killed nsys leaves behind (leftovers.py), and nsys's output relayed (output.py). Finding nsys and exporting
its report are the loader's (nsync.load.nsys.locate, nsync.load.nsys.export): the analysis reads an .nsys-rep too."""

from nsync.capturing.nsys.capture import (
    CaptureOptions,
    CaptureResult,
    NsysFailedFirst,
    profile_flags,
    run_capture,
)

__all__ = ["CaptureOptions", "CaptureResult", "NsysFailedFirst", "profile_flags", "run_capture"]
