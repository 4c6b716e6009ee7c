"""``nsync profile`` as a library: the options (options.py), the calibration runs before a capture
(calibrating.py), the capture and its analysis (capturing.py)."""

from nsync.profiling.capturing import prepare_output, profile, to_settle
from nsync.profiling.options import ProfileOptions, ProfileResult

__all__ = ["ProfileOptions", "ProfileResult", "prepare_output", "profile", "to_settle"]
