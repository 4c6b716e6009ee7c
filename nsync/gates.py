"""The CI gates: a command's result judged against a threshold, the verdict raised as the exception whose exit
code the command returns (GateFailed: 3; CannotJudge: 1, a gate never passes unknowingly).

    >>> nsync.gates.fail_above(nsync.analyze("run.sqlite"), pct=5)           # nsync analyze --fail-above 5
    >>> nsync.gates.fail_on_regression(nsync.diff(base, cand), pct=5)       # nsync diff --fail-on-regression 5
    >>> nsync.gates.fail_on_slowdown(nsync.measure(a, b), pct=5)            # nsync measure --fail-on-regression 5
    >>> nsync.gates.fail_on_straggler(nsync.analyze_ranks([run]), pct=5)    # nsync ranks --fail-above 5
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nsync.errors import CannotJudge, GateFailed
from nsync.render.text import fixed

if TYPE_CHECKING:
    from nsync.report import Analysis, Diff, Measurement, Ranks


def fail_above(analysis: Analysis, pct: float) -> None:
    """Raise GateFailed when fixing a sync is predicted to save more than ``pct`` % of a step, CannotJudge when
    there is no prediction to gate on."""
    verdict = analysis.verdict
    if verdict is None:
        skipped = (w.message for w in analysis.warnings if w.code == "replay-skipped")
        reason = next(skipped, "no steps, so no what-if prediction")
        raise CannotJudge("cannot gate this trace", reason)
    if verdict.share_pct > pct:
        raise GateFailed(
            f"fixing {verdict.site or 'all the syncs of a step'} is predicted to save {fixed(verdict.share_pct, 1)} % "
            f"of a step (> {pct:g} %)"
        )


def fail_on_regression(result: Diff, pct: float) -> None:
    """Raise GateFailed when the candidate regressed by more than ``pct`` % of its step time (on the verdict's
    basis), CannotJudge when the runs cannot be compared or the profiler may hide a regression (unclear)."""
    if result.verdict in ("inconclusive", "unclear"):
        raise CannotJudge("cannot judge these runs", "; ".join(result.reasons) or f"the verdict is {result.verdict}")
    if result.regressed_beyond(pct):
        raise GateFailed(
            f"step time regressed by {fixed(result.verdict_delta_pct, 1)} % (> {pct:g} %, "
            f"{result.step_ms.verdict_basis})"
        )


def fail_on_straggler(ranks: Ranks, pct: float) -> None:
    """Raise GateFailed when one rank's sync holds every rank's collectives for more than ``pct`` % of a step,
    CannotJudge when no collective lined the ranks up or rank 0 has no steps (nothing to judge them by)."""
    step_ms = ranks.ranks[0].median_step_ms if ranks.ranks else None
    if not ranks.collectives or not step_ms:
        raise CannotJudge("cannot judge these ranks", ranks.verdict)
    top = ranks.stragglers[0] if ranks.stragglers else None
    share = 100 * top.delay_ms_per_step / step_ms if top is not None else 0.0
    if top is not None and share > pct:
        raise GateFailed(
            f"rank {top.rank}'s sync at {top.where} holds every rank's collectives for {fixed(share, 1)} % of a step "
            f"(> {pct:g} %)"
        )


def fail_on_slowdown(measurement: Measurement, pct: float) -> None:
    """Raise GateFailed when the candidate measured slower beyond the runs' noise and by more than ``pct`` %,
    CannotJudge when the runs are too noisy to tell whether it is (the interval reaches past ``pct`` %)."""
    change = measurement.change
    if measurement.verdict == "slower" and change.pct > pct:
        raise GateFailed(
            f"B is slower by {fixed(change.pct, 1)} % (> {pct:g} %; {100 * measurement.confidence:g} % interval "
            f"{fixed(change.low_pct, 1)} to "
            f"{fixed(change.high_pct, 1)} %)"
        )
    if measurement.verdict == "unclear" and change.high_pct > pct:
        runs = f" (about {change.runs_to_tell} runs of each would tell)" if change.runs_to_tell else ""
        raise CannotJudge(
            "cannot judge these runs",
            f"B may be slower by up to {fixed(change.high_pct, 1)} %, or not: the runs are too noisy{runs}",
        )
