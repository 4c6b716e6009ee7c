"""The what-if's budget: how many steps, call sites and loops can be replayed at each host scale in a few
seconds, however many syncs the trace has."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from nsync.settings import setting
from nsync.stages.replay.fit import FIT_REPLAYS
from nsync.stages.replay.model import LOOP_MIN_READS
from nsync.stages.replay.settings import ReplaySettings
from nsync.stages.steps import Steps


class ReplaySkipped(Exception):
    """Why the what-if was not replayed (said to the user as a warning)."""


# A replay is a loop over syncs (about 20 µs each): at most this many sync-replays per analysis. Every call
# site is replayed over a run of analysed steps in the middle (MAX_REPLAY_STEPS: the median of that many is
# steady), fewer where that is too many sync-replays (at least MIN_REPLAY_STEPS), and if even that is too
# many, the call sites costliest in exposed idle that fit.
REPLAY_BUDGET = 150_000
MAX_REPLAY_STEPS = 200
MIN_REPLAY_STEPS = 8


def replay_span(steps: Steps, sync_start: np.ndarray, replays: int, budget: int = REPLAY_BUDGET) -> tuple[int, int]:
    """The analysed steps to replay ([first, stop)): a run in the middle of at most MAX_REPLAY_STEPS, fewer
    if ``replays`` replays of their syncs would not fit the budget (but at least MIN_REPLAY_STEPS)."""
    analysed = steps.analysed
    count = len(analysed)
    start, end = int(analysed["start"].iloc[0]), int(analysed["end"].iloc[-1])
    # the syncs of the analysed span, between its steps too: the replay re-times all of them
    per_step = max(int(((sync_start >= start) & (sync_start < end)).sum()) / count, 1e-9)
    keep = min(count, MAX_REPLAY_STEPS, max(int(budget / (replays * per_step)), MIN_REPLAY_STEPS))
    first = (count - keep) // 2
    return first, first + keep


@dataclass(frozen=True)
class Budget:
    """The steps replayed and what the budget leaves for: the fits' and the host speeds' replays, and the syncs
    of one replay."""

    first: int
    stop: int
    fits: int
    speeds: int
    syncs: int

    def sites_fit(self, scales: int, groups: int) -> int:
        """Call sites that fit the budget at ``scales`` host scales, beside ``groups`` groups."""
        return (REPLAY_BUDGET // max(self.syncs, 1) - 1 - self.fits - self.speeds) // scales - 3 - groups


def budget_of(
    steps: Steps, sync_start: np.ndarray, callsites: pd.DataFrame, groups: int, settings: ReplaySettings
) -> Budget:
    """The steps to replay, for the most replays the host scales could ask (ReplaySkipped: none fit)."""
    calibrated = settings.calibrated
    alternatives = 2 + len(settings.scale_range) if calibrated else len(settings.scale_range)
    fits = FIT_REPLAYS * 3 if calibrated else 0
    # each loop of reads is replayed twice more (its reads released, then it vectorised): at most one loop per
    # site read that often a step
    loops_at_most = int((callsites["syncs_per_step"].astype(float) >= LOOP_MIN_READS).sum()) if len(callsites) else 0
    speeds = 2 if calibrated and settings.host_speed_spread > 0 else 0
    replays = (len(callsites) + groups + 2 * loops_at_most + 3) * (1 + alternatives) + 1 + fits + speeds
    first, stop = replay_span(steps, sync_start, replays)
    replayed = steps.analysed.iloc[first:stop]
    window = sync_start[(sync_start >= replayed["start"].iloc[0]) & (sync_start < replayed["end"].iloc[-1])]
    budget = Budget(first, stop, fits, speeds, len(window))
    if budget.sites_fit(1 + alternatives, groups) < 1:
        raise ReplaySkipped(
            f"what-if replay skipped: {len(window)} syncs in {stop - first} steps are too many to replay "
            f"(analyse a part of the capture: {setting('AnalysisConfig.window_s')})"
        )
    return budget
