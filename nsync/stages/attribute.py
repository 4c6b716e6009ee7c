"""Stage 3: what each sync cost — host wait, lead before, drain, rebuild and exposed GPU idle.

One sync S on host thread T, interval [s0, s1] (docs/how-it-works.md, §3)::

    host T   ──launch──launch──[==== S waits ====]──py──launch─py──launch──launch──▶
    GPU      ████████████████████████▏ idle (exposed)          ██     ██  ████████
                       lead L(s0)    D                s1               R
    exposed idle E(S) = GPU idle inside [max(s0, min(D, s1)), R]

- lead L(t): how far the latest GPU end among ops T launched by t lies ahead of t (>= 0);
- drain D: end of the last op S waited for (its stream, or the device, launched by the cutoff);
- rebuild R: first launch after s1 that puts T's lead back above its threshold, T's next sync, or the
  end of the step after the sync's own, whichever comes first. (Not the sync's own step end: a sync at
  the end of a step starves the start of the next one, so R may run on into the next step when that step
  follows straight on.)

The window starts at s0 rather than at D when the GPU ran dry before the call: that idle came from
the host being slow already, not from S. Consecutive syncs on one thread never share idle, because
R stops at the next sync. Syncs of several threads can have overlapping windows: an idle nanosecond in
more than one is counted once, for the sync whose window began last (BusyUnion.idle_once), so that the
syncs' exposed idle adds up to at most the GPU idle it stands for.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from nsync.config import AnalysisConfig
from nsync.load import Trace
from nsync.stages.steps import Steps, step_containing
from nsync.stages.timeline import BusyUnion, group_codes, latest_at, rows_by_key, running_max_at

NO_TIME = np.iinfo(np.int64).max
# what attribute_syncs adds to detect's SYNC_COLUMNS (the rows keep detect's SYNC_ORDER)
ATTRIBUTED_COLUMNS = (
    *("wait_ns", "drain_ns", "lead_before_ns", "exposed_start_ns", "rebuild_ns", "exposed_idle_ns", "step"),
)


@dataclass(frozen=True)
class LeadCurve:
    """Thread T's lead just after each of its launches: L(t_i) = running max GPU end - t_i."""

    launch_end: np.ndarray
    gpu_end_max: np.ndarray
    threshold_ns: int

    @classmethod
    def of(cls, launch_end: np.ndarray, gpu_end: np.ndarray, config: AnalysisConfig) -> LeadCurve:
        """From one thread's launches, in launch-end order."""
        t = np.asarray(launch_end, np.int64)
        running = np.maximum.accumulate(np.asarray(gpu_end, np.int64)) if len(t) else t
        lead_at_launch = running - t
        np.clip(lead_at_launch, 0, None, out=lead_at_launch)
        median = float(np.median(lead_at_launch, overwrite_input=True)) if len(t) else 0.0
        threshold = max(config.lead_floor_ns, int(config.lead_fraction * median))
        return cls(launch_end=t, gpu_end_max=running, threshold_ns=threshold)

    def lead_at(self, t: np.ndarray) -> np.ndarray:
        latest = latest_at(self.launch_end, self.gpu_end_max, t)  # gpu_end_max is a running max already
        return np.where(latest >= 0, np.clip(latest - np.asarray(t, np.int64), 0, None), 0)

    def rebuilt_after(self, t: np.ndarray) -> np.ndarray:
        """The first instant >= t at which the lead is at or above threshold (NO_TIME if never)."""
        t = np.asarray(t, np.int64)
        n = len(self.launch_end)
        found_at = np.full(t.shape, NO_TIME, np.int64)
        if n:
            ok = (self.gpu_end_max - self.launch_end) >= self.threshold_ns
            next_ok = np.minimum.accumulate(np.where(ok, np.arange(n), n)[::-1])[::-1]
            j = np.append(next_ok, n)[np.searchsorted(self.launch_end, t, side="right")]
            found = j < n
            found_at[found] = self.launch_end[j[found]]
        return np.where(self.lead_at(t) >= self.threshold_ns, t, found_at)


def lead_curves(ops: pd.DataFrame, threads: np.ndarray, config: AnalysisConfig) -> dict[int, LeadCurve]:
    """The lead curve of each of ``threads``."""
    threads = np.unique(np.asarray(threads, np.int64))
    launch_end, gpu_end = ops["launch_end"].to_numpy(), ops["end"].to_numpy()
    return {
        int(threads[mine[0]]): LeadCurve.of(launch_end[rows], gpu_end[rows], config)
        for mine, rows in rows_by_key([ops["launch_tid"].to_numpy()], [threads], launch_end)
    }


def device_busy(trace: Trace, ops: pd.DataFrame) -> dict[tuple[int, int], BusyUnion]:
    """The GPU-busy union per (process, device): ops plus the overhead nsys itself counts as busy."""
    unions = {}
    extra = trace.gpu_busy_extra
    pid, device = ops["global_pid"].to_numpy(), ops["device_id"].to_numpy()
    start, end = ops["start"].to_numpy(), ops["end"].to_numpy()
    (codes,) = group_codes([pid, device])
    groups = int(codes.max(initial=-1)) + 1
    for code in range(groups):
        rows = slice(None) if groups == 1 else np.flatnonzero(codes == code)  # one device: no copy
        key = (int(pid[rows][0]), int(device[rows][0]))
        busy_start, busy_end = start[rows], end[rows]
        mine = extra.loc[extra["global_pid"] == key[0]].sort_values("start")
        if len(mine):  # the ops come in start order: the overhead is slotted in rather than all sorted again
            at = np.searchsorted(busy_start, mine["start"].to_numpy())
            busy_start = np.insert(busy_start, at, mine["start"].to_numpy())
            busy_end = np.insert(busy_end, at, mine["end"].to_numpy())
        unions[key] = BusyUnion(busy_start, busy_end)
    return dict(sorted(unions.items()))


def drain_points(syncs: pd.DataFrame, ops: pd.DataFrame) -> np.ndarray:
    """End of the last op each sync waited for (its stream or whole device, launched by the cutoff)."""
    drain = np.full(len(syncs), -1, np.int64)
    launch_start, gpu_end = ops["launch_start"].to_numpy(), ops["end"].to_numpy()
    cutoff = syncs["cutoff_ns"].to_numpy()
    stream_scoped = syncs["scope_stream_id"].to_numpy() >= 0
    for scoped in (True, False):
        wanted = np.flatnonzero(stream_scoped == scoped)
        op_columns = ["global_pid", "device_id", "stream_id"] if scoped else ["global_pid", "device_id"]
        sync_columns = ["global_pid", "device_id", "scope_stream_id"] if scoped else ["global_pid", "device_id"]
        keys = [ops[c].to_numpy() for c in op_columns], [syncs[c].to_numpy()[wanted] for c in sync_columns]
        for mine, rows in rows_by_key(*keys, launch_start):
            drain[wanted[mine]] = running_max_at(launch_start[rows], gpu_end[rows], cutoff[wanted[mine]])
    return drain


def attribute_syncs(
    ops: pd.DataFrame,
    syncs: pd.DataFrame,
    steps: Steps,
    busy: dict[tuple[int, int], BusyUnion],
    config: AnalysisConfig,
    window_end_ns: int,
    curves: dict[int, LeadCurve] | None = None,
) -> pd.DataFrame:
    """Add wait_ns, lead_before_ns, drain_ns, exposed_start_ns, rebuild_ns, exposed_idle_ns and step to each
    sync. ``exposed_start_ns``: where the GPU may start to idle for the sync, the moment it drained the
    queue (within the call; the call's start when it waited for nothing).

    No rebuild point lies beyond ``window_end_ns``, the end of the analysed steps (or of the GPU work).
    ``curves`` (from :func:`lead_curves`) saves sorting the ops again when the caller has them. The syncs
    come, and stay, in detect's order (SYNC_ORDER).
    """
    syncs = syncs.reset_index(drop=True)
    s0, s1 = syncs["start"].to_numpy(np.int64), syncs["end"].to_numpy(np.int64)
    syncs["wait_ns"] = s1 - s0
    syncs["drain_ns"] = drain_points(syncs, ops)

    tids = syncs["global_tid"].to_numpy(np.int64)
    bound = np.full(len(syncs), NO_TIME, np.int64)  # the thread's next sync
    lead_before = np.zeros(len(syncs), np.int64)
    rebuilt = np.full(len(syncs), NO_TIME, np.int64)
    curves = curves if curves is not None else lead_curves(ops, tids, config)
    for tid, rows in syncs.groupby("global_tid", sort=False).indices.items():  # each thread's, in start order
        bound[rows[:-1]] = s0[rows[1:]]
        curve = curves[int(tid)]
        lead_before[rows] = curve.lead_at(s0[rows])
        rebuilt[rows] = curve.rebuilt_after(s1[rows])
    bound = np.minimum(bound, _step_end_after(steps.table, s1))
    drain = syncs["drain_ns"].to_numpy()
    start = np.where(drain >= 0, np.maximum(s0, np.minimum(drain, s1)), s0)
    rebuild = np.maximum(np.minimum(np.minimum(rebuilt, bound), window_end_ns), start)
    rebuild = np.maximum(rebuild, s1)
    syncs["lead_before_ns"] = lead_before
    syncs["exposed_start_ns"] = start
    syncs["rebuild_ns"] = rebuild
    # idle is counted inside the analysed window only, like the GPU idle it is a part of (a call that
    # returns after the last GPU op would otherwise count idle past the window's end)
    exposed_end = np.minimum(rebuild, window_end_ns)
    exposed_start = np.minimum(start, exposed_end)
    exposed = np.zeros(len(syncs), np.int64)
    for (pid, device), rows in syncs.groupby(["global_pid", "device_id"], sort=False).indices.items():
        union = busy.get((int(pid), int(device)))
        if union is not None:  # each idle nanosecond of a GPU counted once, for the sync that began last
            exposed[rows] = union.idle_once(exposed_start[rows], exposed_end[rows])
    syncs["exposed_idle_ns"] = exposed
    syncs["step"] = step_of(steps, s0)
    return syncs


def _step_end_after(table: pd.DataFrame, t: np.ndarray) -> np.ndarray:
    """The end of the step after the one containing each t, when that step follows straight on (else the
    own step's end; NO_TIME outside steps). Steps "follow straight on" when the gap between them is under
    a tenth of the median step: a pause between phases is not the next step's start."""
    k = step_containing(table, t)
    if table.empty:
        return np.full(len(t), NO_TIME, np.int64)
    starts, ends = table["start"].to_numpy(np.int64), table["end"].to_numpy(np.int64)
    kc = np.clip(k, 0, None)
    nxt = np.clip(kc + 1, 0, len(ends) - 1)
    contiguous = (nxt > kc) & (starts[nxt] - ends[kc] <= 0.1 * np.median(ends - starts))
    return np.where(k >= 0, np.where(contiguous, ends[nxt], ends[kc]), NO_TIME)


def step_of(steps: Steps, t: np.ndarray) -> np.ndarray:
    """Index (among analysed steps) of the step containing each t, or -1."""
    return step_containing(steps.analysed, t)
