"""The statistics of ``nsync measure``: a change and its interval, from runs' or blocks' median steps.

One run is one sample of a noisy host: the same program's median step moved by 6-22 % (one standard deviation)
from one process to the next on the H200 (fixtures/h200/measure/README.md), more than many fixes save. So each
run counts as one sample (its median step), and the change is the ratio of the two commands' geometric means of
run medians, with Welch's t interval on their logarithms: a change of a few percent needs many runs of each.

One command whose program asks ``nsync.fixed()`` runs both versions in each process, in alternating blocks of
optimizer steps (A B B A...): a pair of neighbouring blocks gives the ratio of their median steps, which the
process's own level and slow drift cancel out of, and a run's change is the geometric mean of its pairs'. The
runs' changes are the samples (:func:`switched_change`), far less spread than separate runs' steps."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from nsync.report.measurement import THRESHOLD_PCT, MeasuredChange, MeasuredCommand, MeasureVerdict

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


def measured_command(
    label: str, command: list[str], run_steps_ms: list[np.ndarray], block_steps_ms: list[np.ndarray] | None = None
) -> MeasuredCommand:
    """One command's (one version's) figures from its runs' steps; ``block_steps_ms``: its blocks' steps (one
    command), whose medians then give its step and spread."""
    medians = [float(np.median(steps)) for steps in run_steps_ms]
    blocks = [float(np.median(steps)) for steps in block_steps_ms] if block_steps_ms is not None else None
    level = np.log(blocks if blocks is not None else medians)
    return MeasuredCommand(
        label=label,
        command=command,
        run_median_step_ms=[round(m, 4) for m in medians],
        steps_per_run=[len(steps) for steps in run_steps_ms],
        median_step_ms=round(float(np.exp(level.mean())), 4),
        run_spread_pct=_spread_pct(np.log(medians)),
        block_median_step_ms=[round(m, 4) for m in blocks] if blocks is not None else None,
        block_spread_pct=_spread_pct(level) if blocks is not None else None,
    )


def _spread_pct(logs: np.ndarray) -> float:
    return round(100 * float(np.std(logs, ddof=1)), 2) if len(logs) > 1 else 0.0


def change_between(
    baseline_ms: list[float], candidate_ms: list[float], threshold_pct: float = THRESHOLD_PCT
) -> tuple[MeasuredChange, MeasureVerdict]:
    """The candidate's change against the baseline from each one's run medians (at least two runs each), and
    the verdict: faster or slower where the interval leaves out no change, the same where it lies within
    ``threshold_pct`` either way, unclear otherwise."""
    a, b = np.log(baseline_ms), np.log(candidate_ms)
    var_a, var_b = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(var_a + var_b)
    # Welch-Satterthwaite degrees of freedom (no spread at all: the pooled count)
    df = se**4 / (var_a**2 / (len(a) - 1) + var_b**2 / (len(b) - 1)) if se > 0 else len(a) + len(b) - 2
    shift, half = float(b.mean() - a.mean()), t975(df) * se
    verdict = _verdict(shift, half, threshold_pct)
    to_tell = _runs_to_tell(a, b, _bound(threshold_pct)) if verdict == "unclear" else None
    return _change(float(np.exp(a.mean())), shift, half, runs_to_tell=to_tell), verdict


def switched_change(
    runs: list[tuple[list[float], list[float]]], block_steps: int, threshold_pct: float = THRESHOLD_PCT
) -> tuple[MeasuredChange, MeasureVerdict]:
    """The candidate's change against the baseline from one command's runs, each a list of pairs of
    neighbouring blocks (the baseline's block medians, the candidate's, pair by pair; two pairs or more), and
    the verdict as :func:`change_between` gives it.

    A run's change is the mean over its pairs of the log ratio of their medians. Runs are the samples: the
    change itself moves from one process to the next by more than one process's pairs say (on the H200 one
    run's interval missed the mean of four others' changes 9 times in 25, fixtures/h200/switched). One run has
    only its pairs: its interval is that process's, and where unclear the steps that would settle it count
    ``block_steps`` per block, two blocks a pair; with more, the runs."""
    ratios = [np.log(b) - np.log(a) for a, b in runs]
    if len(runs) == 1:
        samples, to_tell = ratios[0], "steps"
    else:
        samples, to_tell = np.array([r.mean() for r in ratios]), "runs"
    count, spread, shift = len(samples), float(samples.std(ddof=1)), float(samples.mean())
    half = t975(count - 1) * spread / math.sqrt(count)
    verdict = _verdict(shift, half, threshold_pct)
    needed = None
    if verdict == "unclear":
        needed = _count_to_tell(
            abs(shift), _bound(threshold_pct), spread, count, lambda n: n - 1, most=100 if to_tell == "runs" else 500
        )
    base_ms = float(np.exp(np.mean(np.concatenate([np.log(a) for a, _ in runs]))))
    change = _change(
        base_ms,
        shift,
        half,
        runs_to_tell=needed if to_tell == "runs" else None,
        steps_to_tell=2 * block_steps * needed if needed and to_tell == "steps" else None,
        run_pct=[round(100 * math.expm1(float(r.mean())), 2) for r in ratios],
    )
    return change, verdict


def _bound(threshold_pct: float) -> float:
    return math.log1p(threshold_pct / 100)


def _verdict(shift: float, half: float, threshold_pct: float) -> MeasureVerdict:
    low, high, bound = shift - half, shift + half, _bound(threshold_pct)
    if high < 0:
        return "faster"
    if low > 0:
        return "slower"
    if low > -bound and high < bound:
        return "same"
    return "unclear"


def _change(
    base_ms: float,
    shift: float,
    half: float,
    runs_to_tell: int | None = None,
    steps_to_tell: int | None = None,
    run_pct: list[float] | None = None,
) -> MeasuredChange:
    """The change ``exp(shift) - 1`` of a step of ``base_ms``, with its interval ``shift ± half`` (logarithms)."""
    low, high = shift - half, shift + half
    return MeasuredChange(
        ms_per_step=round(base_ms * math.expm1(shift), 4),
        pct=round(100 * math.expm1(shift), 2),
        low_pct=round(100 * math.expm1(low), 2),
        high_pct=round(100 * math.expm1(high), 2),
        low_ms=round(base_ms * math.expm1(low), 4),
        high_ms=round(base_ms * math.expm1(high), 4),
        runs_to_tell=runs_to_tell,
        steps_to_tell=steps_to_tell,
        run_pct=run_pct,
    )


def _runs_to_tell(a: np.ndarray, b: np.ndarray, bound: float, most: int = 100) -> int | None:
    """Runs of each command at which the interval would settle the verdict if the change and the runs' spread
    stayed as measured; None beyond ``most``."""
    shift = abs(float(b.mean() - a.mean()))
    pooled = (a.var(ddof=1) * (len(a) - 1) + b.var(ddof=1) * (len(b) - 1)) / (len(a) + len(b) - 2)
    # two samples of n runs: the difference's spread is sqrt(2 / n) times one run's, with 2n - 2 degrees of freedom
    return _count_to_tell(shift, bound, math.sqrt(2 * pooled), max(len(a), len(b)), lambda n: 2 * n - 2, most)


def _count_to_tell(
    shift: float, bound: float, spread: float, have: int, df: Callable[[int], int], most: int
) -> int | None:
    """The least count n (beyond ``have``) whose interval, t975(df(n)) * spread / sqrt(n), would settle the
    verdict were the change and the spread as measured: leave out no change (a change beyond half the
    threshold) or lie within the threshold (one under it); None beyond ``most``."""
    half_width = max(shift, bound - shift)
    for n in range(have + 1, most + 1):
        if t975(df(n)) * spread / math.sqrt(n) < half_width:
            return n
    return None
