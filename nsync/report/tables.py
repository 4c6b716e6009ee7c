"""The tables behind an analysis's facts: every sync and call site as columns, and the exact figures two runs
are compared by. They ride along where the analysis ran (``Analysis.tables``) and are never written to JSON:
a result read back from a file has none."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (an annotation only: reading a saved result or asking nsync --help loads no pandas)
    import numpy as np
    import pandas as pd

# what the what-if adds to each call site of ``AnalysisTables.callsites``: its predicted saving per step and the
# saving's likely range; and to each in a loop of reads, which loop (its index in the what-if's loops), the loop's
# saving done for all items at once, and its range (NaN: in none)
SAVING_COLUMNS = (
    "predicted_saving_ns_per_step",
    "predicted_saving_ns_per_step_low",
    "predicted_saving_ns_per_step_high",
)
LOOP_COLUMNS = ("loop_id", "loop_saving_ns_per_step", "loop_saving_ns_per_step_low", "loop_saving_ns_per_step_high")


@dataclass(frozen=True)
class AnalysisTables:
    """What ``--db`` writes and ``nsync diff`` compares, beside the facts.

    ``syncs``: one row per sync of the analysed steps (the whole window without steps), with its timing, its
    attribution and its call site (nsync.stages.detect, attribute, callsites). ``callsites``: one row per call
    site, ranked as the facts are, with its saving, its range and its ``advice``. ``steps``: every step found
    (start, end, name), the warm-up included; ``step_stats``: one row per analysed step."""

    syncs: pd.DataFrame
    callsites: pd.DataFrame
    steps: pd.DataFrame
    step_stats: pd.DataFrame
    thread_names: dict[int, str] = field(default_factory=dict)
    kernel_time_ns: dict[str, int] = field(default_factory=dict)  # GPU time per kernel name
    gpu_uuids: list[str] = field(default_factory=list)  # the physical GPUs the work ran on, where the export says
    program: str = ""  # the captured command line, as nsys recorded it (empty when unknown)
    # the what-if's step as it is without the profiler, the calibration's unprofiled steps it was fitted to (None:
    # uncalibrated), and how far another unprofiled run on this machine may stray, % (WhatIf.between_runs_pct)
    unprofiled_step_ns: float | None = None
    calibrated_steps_ns: np.ndarray | None = None
    between_runs_pct: float = 0.0
