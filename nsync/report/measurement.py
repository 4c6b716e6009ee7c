"""The report of ``nsync measure``: two commands' steps timed without the profiler in alternate runs, and the
change from the first to the second with its interval (``nsync.measure/1``).

One run is one sample of a noisy host: the same program's median step moved by 6-22 % (one standard deviation)
from one process to the next on the H200 (fixtures/h200/measure/README.md), more than many fixes save. So each
run counts as one sample (its median step), and the change is the ratio of the two commands' geometric means of
run medians, with Welch's t interval on their logarithms: a change of a few percent needs many runs of each."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

SCHEMA = "nsync.measure/1"
CONFIDENCE = 0.95
THRESHOLD_PCT = 5.0  # a change under this is "the same" (the analysis's worth-fixing share of a step)

# Student's t, two-sided 95 % (the 0.975 quantile), for 1-30 degrees of freedom; beyond, ~1.96 + 2.46 / df
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t975(df: float) -> float:
    """The 0.975 quantile of Student's t with ``df`` degrees of freedom (rounded down: the wider interval)."""
    whole = max(1, math.floor(df))
    if whole <= len(_T975):
        return _T975[whole - 1]
    return 1.960 + (_T975[-1] - 1.960) * len(_T975) / whole


@dataclass(frozen=True)
class MeasuredCommand:
    label: str  # A (the baseline), B (the candidate)
    command: list[str]
    run_median_step_ms: list[float]  # each run's median step, in the order run
    steps_per_run: list[int]
    median_step_ms: float  # the geometric mean of the run medians
    run_spread_pct: float  # the standard deviation of log run medians, as a percentage


@dataclass(frozen=True)
class MeasuredChange:
    """B against A: positive is slower."""

    ms_per_step: float
    pct: float
    low_pct: float  # the 95 % interval
    high_pct: float
    low_ms: float
    high_ms: float
    runs_to_tell: int | None  # unclear: runs of each that would likely settle it (None: over 100)


@dataclass(frozen=True)
class Measurement:
    schema: str
    verdict: str  # faster | slower | same | unclear
    step_source: str  # marks (optimizer steps) or nvtx:NAME
    order: list[str]  # the labels in the order the runs were made
    baseline: MeasuredCommand
    candidate: MeasuredCommand
    change: MeasuredChange
    threshold_pct: float = THRESHOLD_PCT
    confidence: float = CONFIDENCE
    notes: list[str] | None = None
    interrupted: bool = False  # Ctrl-C ended the runs early: the figures are of those made before it

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def measured_command(label: str, command: list[str], run_steps_ms: list[np.ndarray]) -> MeasuredCommand:
    medians = [float(np.median(steps)) for steps in run_steps_ms]
    logs = np.log(medians)
    spread = float(np.std(logs, ddof=1)) if len(logs) > 1 else 0.0
    return MeasuredCommand(
        label=label,
        command=command,
        run_median_step_ms=[round(m, 4) for m in medians],
        steps_per_run=[len(steps) for steps in run_steps_ms],
        median_step_ms=round(float(np.exp(logs.mean())), 4),
        run_spread_pct=round(100 * spread, 2),
    )


def change_between(
    baseline_ms: list[float], candidate_ms: list[float], threshold_pct: float = THRESHOLD_PCT
) -> tuple[MeasuredChange, str]:
    """The candidate's change against the baseline from each one's run medians (at least two runs each), and
    the verdict: faster or slower where the interval leaves out no change, the same where it lies within
    ``threshold_pct`` either way, unclear otherwise."""
    a, b = np.log(baseline_ms), np.log(candidate_ms)
    var_a, var_b = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(var_a + var_b)
    # Welch-Satterthwaite degrees of freedom (no spread at all: the pooled count)
    df = se**4 / (var_a**2 / (len(a) - 1) + var_b**2 / (len(b) - 1)) if se > 0 else len(a) + len(b) - 2
    shift = float(b.mean() - a.mean())
    half = t975(df) * se
    low, high = shift - half, shift + half
    base_ms = float(np.exp(a.mean()))
    bound = math.log1p(threshold_pct / 100)
    if high < 0:
        verdict = "faster"
    elif low > 0:
        verdict = "slower"
    elif low > -bound and high < bound:
        verdict = "same"
    else:
        verdict = "unclear"
    change = MeasuredChange(
        ms_per_step=round(base_ms * math.expm1(shift), 4),
        pct=round(100 * math.expm1(shift), 2),
        low_pct=round(100 * math.expm1(low), 2),
        high_pct=round(100 * math.expm1(high), 2),
        low_ms=round(base_ms * math.expm1(low), 4),
        high_ms=round(base_ms * math.expm1(high), 4),
        runs_to_tell=_runs_to_tell(a, b, bound) if verdict == "unclear" else None,
    )
    return change, verdict


def _runs_to_tell(a: np.ndarray, b: np.ndarray, bound: float, most: int = 100) -> int | None:
    """Runs of each command at which the interval would settle the verdict if the change and the runs' spread
    stayed as measured: leave out no change (a change beyond half the threshold) or lie within the threshold
    (one under it); None beyond ``most``."""
    shift = abs(float(b.mean() - a.mean()))
    half_width = max(shift, bound - shift)
    pooled = (a.var(ddof=1) * (len(a) - 1) + b.var(ddof=1) * (len(b) - 1)) / (len(a) + len(b) - 2)
    for runs in range(max(len(a), len(b)) + 1, most + 1):
        if t975(2 * runs - 2) * math.sqrt(2 * pooled / runs) < half_width:
            return runs
    return None
