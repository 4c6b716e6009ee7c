"""Every fitted number lives in nsync.knowledge.fitted, names what it was fitted on, and is the one the code uses.
(The likely range and the verdict's cut-offs are refit from the ground truth by tests/test_intervals.py.)"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from nsync.config import AnalysisConfig
from nsync.knowledge import fitted

ROOT = Path(__file__).resolve().parent.parent


def test_every_fitted_constant_names_a_source_that_is_kept() -> None:
    constants = {name for name in vars(fitted) if name.isupper() and name != "SOURCES"}
    assert set(fitted.SOURCES) == constants
    missing = [f"{name}: {path}" for name, path in fitted.SOURCES.items() if not (ROOT / path).is_file()]
    assert missing == []


def test_the_analysis_defaults_are_the_fitted_numbers() -> None:
    config = AnalysisConfig()
    assert config.host_scale == fitted.UNCALIBRATED_HOST_SCALE
    assert config.host_scale_range == fitted.UNCALIBRATED_HOST_SCALE_RANGE
    assert config.calibration_spread == fitted.CALIBRATION_SPREAD
    assert config.host_speed_spread == fitted.HOST_SPEED_SPREAD


def test_the_run_step_spread_lies_within_what_the_kept_runs_give() -> None:
    """fixtures/h200/measure: each six-run side's median steps; the deviation of their logarithms, its median over
    the sides, with the population's and the sample's deviation (0.116 and 0.127)."""
    sides = []
    for path in sorted((ROOT / "fixtures/h200/measure").glob("measure-*.json")):
        data = json.loads(path.read_text())
        sides += [data[side]["run_median_step_ms"] for side in ("baseline", "candidate")]
    logs = [[math.log(ms) for ms in runs] for runs in sides if len(runs) == 6]
    assert len(logs) == 14
    low = statistics.median(statistics.pstdev(side) for side in logs)
    high = statistics.median(statistics.stdev(side) for side in logs)
    assert low <= fitted.RUN_STEP_SPREAD <= high
