"""How sure a predicted saving is: its 80 % likely range, and the chance that it passes a threshold.

Both come from how far measured savings fell from predicted ones: ln(measured / predicted) over the fixes that
paid beyond noise in the tuning part of the ground truth (the lab sets, the real programs, the grouped reads,
the hidden `.item()` and the fresh sessions up to fixtures/fresh5), fitted by scripts/fit_ranges.py and scored
on the sessions after it (docs/accuracy.md). That spread holds the model's error and the measured savings' own
run-to-run noise; it is wider where the capture knows less: uncalibrated, or calibrated by a run the replay
cannot explain (its calibration set aside)."""

from __future__ import annotations

from statistics import NormalDist
from typing import Any

import numpy as np

from nsync.knowledge import LOG_RATIO_QUANTILES
from nsync.report.analysis import LIKELY_COVERAGE as COVERAGE

_Z = NormalDist().inv_cdf(0.5 + COVERAGE / 2)


def likely_range(point_ns: Any, basis: str) -> tuple[Any, Any]:
    """The 80 % likely range of a saving predicted at ``point_ns`` (a number or an array; never below zero),
    ``basis`` "calibrated" or "uncalibrated"."""
    low, high = LOG_RATIO_QUANTILES[basis]
    point = np.maximum(point_ns, 0.0)
    return point * np.exp(low), point * np.exp(high)


def chance_above(point_ns: float, threshold_ns: float, basis: str) -> float:
    """The chance that a saving predicted at ``point_ns`` is at least ``threshold_ns``: ln(measured / predicted)
    taken as normal, with the 10th and 90th percentiles of LOG_RATIO_QUANTILES."""
    if point_ns <= 0:
        return 0.0
    if threshold_ns <= 0:
        return 1.0
    low, high = LOG_RATIO_QUANTILES[basis]
    spread = NormalDist((low + high) / 2, (high - low) / (2 * _Z))
    return 1.0 - spread.cdf(float(np.log(threshold_ns / point_ns)))
