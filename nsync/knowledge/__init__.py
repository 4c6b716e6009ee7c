"""What nsync knows that is not in a trace: each library's syncs and the setting that removes them
(libraries.json, read by libraries.py), and every number fitted to measurements (fitted.py, each with what it was
fitted on). The stages read this knowledge through this package alone, so that a library's new version or a refit
lands in one place; it imports nothing of nsync, nor numpy or pandas."""

from nsync.knowledge.fitted import (
    CALIBRATION_SPREAD,
    HOST_SPEED_SPREAD,
    LOG_RATIO_QUANTILES,
    LOOP_GONE_SHARE,
    NESTED_REPEAT,
    NOTHING_CHANCE,
    PROFILER_GAP_NS,
    RUN_STEP_SPREAD,
    UNCALIBRATED_HOST_SCALE,
    UNCALIBRATED_HOST_SCALE_RANGE,
    WORTH_FIXING_CHANCE,
)
from nsync.knowledge.libraries import LibrarySync, generate_reads, library_sync

__all__ = [
    "CALIBRATION_SPREAD",
    "HOST_SPEED_SPREAD",
    "LOG_RATIO_QUANTILES",
    "LOOP_GONE_SHARE",
    "NESTED_REPEAT",
    "NOTHING_CHANCE",
    "PROFILER_GAP_NS",
    "RUN_STEP_SPREAD",
    "UNCALIBRATED_HOST_SCALE",
    "UNCALIBRATED_HOST_SCALE_RANGE",
    "WORTH_FIXING_CHANCE",
    "LibrarySync",
    "generate_reads",
    "library_sync",
]
