"""The program's phases: the main loop's steps apart from what comes before, between and after them.

Start-up (from the capture's start to the first analysed step: model transfer, warm-up steps, library
autotuning), the main loop (the analysed steps), between steps (the gaps inside the loop's span that no
analysed step covers: evaluation loops, checkpoints, a step set aside), and teardown (after the last
step). The per-step figures and the ranking cover the main loop only; a sync elsewhere runs once (or a
few times), so it is listed with the time the host spent waiting in it: the most it costs, once (less where
the host had nothing else to do: a final synchronize waits for work that had to finish anyway). Phases lie
on the host's timeline: when the host runs ahead, the GPU still runs the loop's last steps in the teardown.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsync.stages.callsites import SITE_KEYS
from nsync.stages.steps import Steps, interval_containing
from nsync.stages.timeline import BusyUnion

START_UP, MAIN_LOOP, BETWEEN_STEPS, TEARDOWN = "start-up", "main loop", "between steps", "teardown"
WHOLE_TRACE = "whole trace"  # no steps: one phase
PHASE_COLUMNS = ("phase", "start", "end", "duration_ns", "intervals", "gpu_idle_ns", "sync_count", "host_wait_ns")
PHASE_SITE_COLUMNS = ("phase", *SITE_KEYS, "count", "host_wait_ns")
SITES_PER_PHASE = 5
SMALL_GAP = 0.1  # share of the median step under which a gap between steps belongs to the loop


def phase_intervals(steps: Steps, span_ns: tuple[int, int]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each phase's intervals (starts, ends), in time order; phases of no length are left out."""
    analysed = steps.analysed
    first, last = span_ns
    if analysed.empty:
        return {WHOLE_TRACE: (np.array([first]), np.array([last]))}
    starts, ends = analysed["start"].to_numpy(np.int64), analysed["end"].to_numpy(np.int64)
    # a gap of under a tenth of a step (the loop's own bookkeeping between NVTX ranges) is the main loop's
    gap = starts[1:] - ends[:-1] > SMALL_GAP * np.median(ends - starts)
    loop_starts = np.concatenate([starts[:1], starts[1:][gap]])
    loop_ends = np.concatenate([ends[:-1][gap], ends[-1:]])
    phases = {
        START_UP: (np.array([first]), starts[:1]),
        MAIN_LOOP: (loop_starts, loop_ends),
        BETWEEN_STEPS: (loop_ends[:-1], loop_starts[1:]),
        TEARDOWN: (ends[-1:], np.array([max(last, int(ends[-1]))])),
    }
    return {name: (s, e) for name, (s, e) in phases.items() if (e - s).sum() > 0}


def phase_of(intervals: dict[str, tuple[np.ndarray, np.ndarray]], t: np.ndarray) -> np.ndarray:
    """The index (into ``intervals``) of the phase each instant lies in, or -1 (before the CUDA span, say)."""
    out = np.full(len(t), -1, np.int64)
    for code, (starts, ends) in enumerate(intervals.values()):
        out[interval_containing(starts, ends, t) >= 0] = code
    return out


def phase_table(
    intervals: dict[str, tuple[np.ndarray, np.ndarray]],
    busy: dict[tuple[int, int], BusyUnion],
    syncs: pd.DataFrame,
    steps_count: int,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One row per phase (its time, the GPUs' idle in it, its syncs and their host wait; ``intervals``: the
    main loop's steps, the other phases' stretches), and the call sites of the syncs outside the main loop
    with their one-time cost (host wait), the costliest first."""
    names = list(intervals)
    where = phase_of(intervals, syncs["start"].to_numpy(np.int64)) if len(syncs) else np.zeros(0, np.int64)
    known = where >= 0
    wait = syncs["wait_ns"].to_numpy(np.int64) if len(syncs) else np.zeros(0, np.int64)
    count = np.bincount(where[known], minlength=len(names))
    waited = np.bincount(where[known], weights=wait[known], minlength=len(names))
    table = pd.DataFrame(
        {
            "phase": names,
            "start": [int(s[0]) for s, _ in intervals.values()],
            "end": [int(e[-1]) for _, e in intervals.values()],
            "duration_ns": [int((e - s).sum()) for s, e in intervals.values()],
            "intervals": [steps_count if n == MAIN_LOOP else len(s) for n, (s, _) in intervals.items()],
            "gpu_idle_ns": [sum(int(u.idle_between(s, e).sum()) for u in busy.values()) for s, e in intervals.values()],
            "sync_count": count.astype(np.int64),
            "host_wait_ns": waited.astype(np.int64),
        },
        columns=list(PHASE_COLUMNS),
    )
    main = names.index(MAIN_LOOP) if MAIN_LOOP in names else -2
    outside = known & (where != main)
    if not outside.any():
        return table, pd.DataFrame({c: pd.Series(dtype=object) for c in PHASE_SITE_COLUMNS})
    rows = syncs.loc[outside, ["site_id", *SITE_KEYS, "wait_ns"]].assign(phase=where[outside])
    sites = (
        rows.groupby(["phase", "site_id"], sort=True)
        .agg(**{c: (c, "first") for c in SITE_KEYS}, count=("wait_ns", "size"), host_wait_ns=("wait_ns", "sum"))
        .reset_index()
        .sort_values(["phase", "host_wait_ns"], ascending=[True, False], kind="stable")
    )
    sites = sites.groupby("phase", sort=False).head(SITES_PER_PHASE)
    sites = sites.assign(phase=np.array(names, dtype=object)[sites["phase"].to_numpy()])
    return table, sites[list(PHASE_SITE_COLUMNS)].reset_index(drop=True)
