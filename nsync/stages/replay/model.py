"""The replay's model of one trace: each stream's ops in launch order, each sync's thread, waits and call, the
loops of reads, prepared once (nsync.stages.replay explains the model)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from nsync.keys import match_rows
from nsync.stages.detect import SyncKind
from nsync.stages.steps import Steps, launched_in_steps
from nsync.stages.timeline import GroupedTimes, group_codes, neighbour_in_group

DEFAULT_LATENCY_NS = 5_000
MAX_GAP_NS = 50_000  # an op that started later than this after the one before it waited for something else
STREAM_KEYS = ("global_pid", "device_id", "stream_id")
REPLAY_CHUNK = 1 << 18  # ops re-timed at a time


@dataclass
class _Stream:
    ops: np.ndarray  # row numbers into the op arrays, in launch order
    cum_dur: np.ndarray  # S_i
    busy_until: float  # end of the work launched before the replayed window (-inf: none)
    done: int = 0
    best: float = -np.inf  # max(busy_until, max_{j<done}(ready_j - S_{j-1}))


@dataclass(frozen=True)
class ReplayModel:
    """Everything a replay needs, prepared once per trace."""

    op_launch: np.ndarray
    op_dur: np.ndarray
    op_thread_sync: np.ndarray  # the sync an op's launch follows (its segment's anchor), or -1: see _anchor_syncs
    op_removed_by: np.ndarray  # the sync whose release takes this op away too (a read's copy), or -1
    latency_ns: float
    gap_ns: float  # between an op and the one queued behind it on a stream (the GPU's dispatch gap)
    streams: dict[tuple[int, int, int], np.ndarray]  # (pid, device, stream) -> op rows in launch order
    stream_busy_until: dict[tuple[int, int, int], float]  # end of what was launched before the window
    sync_start: np.ndarray
    sync_end: np.ndarray
    sync_own: np.ndarray
    sync_release_at: np.ndarray  # where the host resumes when the sync is released (its start, a read's copy)
    sync_release_cost: np.ndarray  # host time the released sync still takes (its own cost; 0 for a read)
    sync_prev: np.ndarray  # index of the previous sync on the same thread, or -1
    sync_call_first: np.ndarray  # the first sync of the call of its line it belongs to (itself if it is): _calls
    sync_call_goes_on: np.ndarray  # the next sync of its thread belongs to the same call
    sync_loop: np.ndarray  # the loop of reads a sync belongs to (see _loops), or -1
    sync_loop_first: np.ndarray  # per loop: its first sync
    sync_loop_last: np.ndarray  # per loop: its last sync
    sync_waits: list[list[tuple[tuple[int, int, int], int]]]  # per sync: (stream, ops waited for count)
    sync_site: np.ndarray  # each sync's call site (site_id)
    window_start_ns: int  # host time is scaled from here until a thread's first sync
    steps: Steps  # the replayed steps (warm-up 0)
    op_in_steps: tuple[np.ndarray, np.ndarray]  # the ops launched inside a step, and its index


def prepare(ops: pd.DataFrame, syncs: pd.DataFrame, steps: Steps) -> ReplayModel:
    """The replay of ``steps`` (all of them are replayed: warm-up 0): the ops launched and the syncs
    started between the first step's start and the last one's end. ``syncs``: detected syncs with
    exposed_start_ns, scope and cutoff. Work launched before the window stays as measured: each stream is busy
    until its measured end."""
    start_ns, end_ns = int(steps.table["start"].iloc[0]), int(steps.table["end"].iloc[-1])
    all_launch = ops["launch_start"].to_numpy(np.int64)
    before = all_launch < start_ns
    ops_in = ops.loc[(~before) & (all_launch < end_ns)]
    syncs = syncs.loc[syncs["start"].between(start_ns, end_ns, inclusive="left")].reset_index(drop=True)
    launch = ops_in["launch_start"].to_numpy(np.int64)
    start, end = ops_in["start"].to_numpy(np.int64), ops_in["end"].to_numpy(np.int64)
    stream_columns = [ops_in[c].to_numpy() for c in STREAM_KEYS]
    (codes,) = group_codes(stream_columns)
    by_stream = GroupedTimes(codes, launch)  # each stream's ops in launch order (ties: row order)
    streams: dict[tuple[int, int, int], np.ndarray] = {}
    for _code, first, stop in by_stream.groups():
        rows = by_stream.order[first:stop]
        pid, device, stream = (int(column[rows[0]]) for column in stream_columns)
        streams[(pid, device, stream)] = rows
    still_running = ops.loc[before & (ops["end"].to_numpy(np.int64) > start_ns)]
    busy_until = still_running.groupby(list(STREAM_KEYS))["end"].max()
    latency, gap = _launch_latency_and_gap(streams, launch, start, end)
    s0, s1 = syncs["start"].to_numpy(np.int64), syncs["end"].to_numpy(np.int64)
    own = s1 - syncs["exposed_start_ns"].to_numpy(np.int64)  # the wait for its own work, after the drain
    tids = syncs["global_tid"].to_numpy(np.int64)
    is_read = (syncs["kind"] == SyncKind.READ).to_numpy()
    op_tid = ops_in["launch_tid"].to_numpy(np.int64)
    anchor = _anchor_syncs(op_tid, ops_in["global_pid"].to_numpy(np.int64), launch, syncs, s0)
    prev = neighbour_in_group(tids, -1)
    call_first = _calls(prev, *(syncs[c].to_numpy(np.int64) for c in CALL_KEYS))
    return ReplayModel(
        op_launch=launch.astype(float),
        op_dur=(end - start).astype(float),
        op_thread_sync=anchor,
        op_removed_by=_removed_with(ops_in, op_tid, launch, syncs),
        latency_ns=latency,
        gap_ns=gap,
        streams=streams,
        stream_busy_until={(int(p), int(d), int(s)): float(v) for (p, d, s), v in busy_until.items()},
        sync_start=s0,
        sync_end=s1,
        sync_own=own.astype(float),
        sync_release_at=np.where(is_read, syncs["read_start_ns"].to_numpy(np.int64), s0),
        sync_release_cost=np.where(is_read, 0, own).astype(float),
        sync_prev=prev,
        sync_call_first=call_first,
        sync_call_goes_on=_goes_on(prev, call_first),
        **_loops(tids, prev, is_read | _pageable_reads(syncs), anchor, syncs, steps),
        sync_waits=_waits(syncs, streams, launch),
        sync_site=syncs["site_id"].to_numpy(np.int64),
        window_start_ns=start_ns,
        steps=Steps(table=steps.table.reset_index(drop=True), source=steps.source, warmup=0),
        op_in_steps=launched_in_steps(steps, launch),
    )


def _launch_latency_and_gap(
    streams: dict, launch: np.ndarray, start: np.ndarray, end: np.ndarray
) -> tuple[float, float]:
    """The median delay from launch call to GPU start of the ops that found their stream idle, and the median
    time from an op's end to the start of the op queued behind it (launched before that end: the GPU's dispatch
    gap, about 1 µs on the H200, fixtures/h200/README.md; longer waits are not the gap, something else held
    the op)."""
    delays, gaps = [], []
    for rows in streams.values():
        prev_end = np.concatenate([[np.iinfo(np.int64).min], np.maximum.accumulate(end[rows])[:-1]])
        idle = prev_end < launch[rows]  # the stream had drained before this launch: no queueing delay
        delays.append((start[rows] - launch[rows])[idle])
        queued = launch[rows] < prev_end
        gaps.append((start[rows] - prev_end)[queued])
    found = np.concatenate(delays) if delays else np.zeros(0)
    found = found[found >= 0]
    latency = float(np.median(found)) if len(found) else float(DEFAULT_LATENCY_NS)
    found = np.concatenate(gaps) if gaps else np.zeros(0)
    found = found[(found >= 0) & (found < MAX_GAP_NS)]
    return latency, float(np.median(found)) if len(found) else 0.0


CALL_KEYS = ("site_id", "caller_id", "stack_id")  # what tells one call of a line from the next (_calls)


def _calls(prev: np.ndarray, site: np.ndarray, caller: np.ndarray, stack: np.ndarray) -> np.ndarray:
    """For each sync, the first sync of the call of its line it belongs to. One call of a line can sync several
    times from inside a library (``print(t)``: eight reads from torch's formatting, each from its own stack,
    all with the same frames from the line outward); a loop over the line syncs from the same stack each time,
    and a helper's line called from two places from two callers. So a thread's syncs of one site and one caller
    make one call until the call's first stack comes back (the next iteration). The fix of the line takes the
    whole call away: the host's time and the GPU work between its first sync and its last."""
    first = np.arange(len(prev))
    site_l, caller_l, stack_l = site.tolist(), caller.tolist(), stack.tolist()
    prev_l, first_l = prev.tolist(), first.tolist()
    for k in range(len(prev_l)):  # scalars: once per sync
        before = prev_l[k]
        if (
            before >= 0
            and site_l[before] == site_l[k] >= 0
            and caller_l[before] == caller_l[k] >= 0
            and stack_l[k] != stack_l[first_l[before]]
        ):
            first_l[k] = first_l[before]
    return np.array(first_l, np.int64)


def _goes_on(prev: np.ndarray, call_first: np.ndarray) -> np.ndarray:
    """Whether the next sync of each sync's thread belongs to its call."""
    out = np.zeros(len(prev), bool)
    inside = np.flatnonzero(call_first != np.arange(len(prev)))
    out[prev[inside]] = True
    return out


LOOP_MIN_READS = 8  # a line read this many times in a row in one step is read in a loop
LOOP_BODY_OPS = 8  # GPU ops launched between two reads of a loop at most: per-item work, not a model's


def _loops(
    tids: np.ndarray, prev: np.ndarray, is_read: np.ndarray, anchor: np.ndarray, syncs: pd.DataFrame, steps: Steps
) -> dict[str, np.ndarray]:
    """The loops of reads: a thread's run of value reads (``is_read``) in one step, a few GPU ops apart (at most
    LOOP_BODY_OPS: a per-item body, not a micro-batch's forward), in which the run's first call (its site,
    caller and stack) comes back at least LOOP_MIN_READS times: ``for c in range(classes): ... .item()``; the
    loop's reads are those of the calls its first iteration makes. The fix the advice gives such a loop does its
    work for all items at once, so when every read of the loop is released, the host's time and the GPU work
    between its first read and its last go with it."""
    count = len(prev)
    body_ops = np.bincount(anchor[anchor >= 0], minlength=count)[:count]
    step = np.searchsorted(steps.table["start"].to_numpy(np.int64), syncs["start"].to_numpy(np.int64), "right")
    has_prev = prev >= 0
    joined = np.zeros(count, bool)
    before = prev[has_prev]
    joined[has_prev] = is_read[has_prev] & is_read[before] & (step[has_prev] == step[before])
    joined[has_prev] &= body_ops[before] <= LOOP_BODY_OPS
    # runs along each thread: a run starts at a sync not joined to its previous one
    first = np.arange(count)
    order = np.argsort(tids, kind="stable")  # thread by thread, each in time order
    run_first = np.maximum.accumulate(np.where(joined[order], -1, np.arange(count)))
    first[order] = order[run_first]
    (key,) = group_codes([syncs[c].to_numpy(np.int64) for c in CALL_KEYS])
    repeats_first = key == key[first]
    firsts, run = np.unique(first, return_inverse=True)
    looped = np.bincount(run, weights=repeats_first)[run] >= LOOP_MIN_READS
    # a read after the loop's last iteration (the next step's first, a few ops on) joins the run but not the
    # loop: the loop's reads are those of the lines its first iteration reads (before its first read comes back)
    counted = np.cumsum(repeats_first[order])  # along ``order``, where each run is a stretch from run_first
    seen = np.zeros(count, np.int64)  # how many times the run's first read has come, up to each sync
    seen[order] = counted - np.concatenate([[0], counted])[run_first]
    pair = run * (int(key.max(initial=0)) + 1) + key
    in_loop = looped & np.isin(pair, pair[seen <= 1])
    last = np.full(len(firsts), -1, np.int64)
    np.maximum.at(last, run[in_loop], np.flatnonzero(in_loop))
    return {"sync_loop": np.where(in_loop, run, -1), "sync_loop_first": firsts, "sync_loop_last": last}


def _pageable_reads(syncs: pd.DataFrame) -> np.ndarray:
    """Copies to pageable host memory (``.tolist()``, ``.numpy()`` of a CUDA tensor): reads too, for _loops."""
    return ((syncs["kind"] == SyncKind.MEMCPY_PAGEABLE) & (syncs["copy_direction"] == "DtoH")).to_numpy()


def _removed_with(ops: pd.DataFrame, op_tid: np.ndarray, launch: np.ndarray, syncs: pd.DataFrame) -> np.ndarray:
    """For each op, the sync whose release removes it, or -1: a value read's device-to-host copy (the fix
    keeps the value on the GPU)."""
    out = np.full(len(ops), -1, np.int64)
    reads = np.flatnonzero((syncs["kind"] == SyncKind.READ).to_numpy())
    copies = np.flatnonzero((ops["copy_direction"] == "DtoH").to_numpy())
    row = match_rows(
        syncs["global_tid"].to_numpy(np.int64)[reads],
        syncs["read_start_ns"].to_numpy(np.int64)[reads],
        op_tid[copies],
        launch[copies],
    )
    out[copies[row[row >= 0]]] = reads[row >= 0]
    return out


def _anchor_syncs(
    op_tid: np.ndarray, op_pid: np.ndarray, launch: np.ndarray, syncs: pd.DataFrame, s0: np.ndarray
) -> np.ndarray:
    """The sync each op's launch follows: the last one before it on its own thread; on a thread with no
    sync of its own (autograd's backward thread, driven by the main thread's ``backward()``), the last one
    before it on any thread of its process, so that its launches move when the main thread's do."""
    sync_tid = syncs["global_tid"].to_numpy(np.int64)
    own = _last_sync_before(op_tid, launch, sync_tid, s0)
    follower = ~np.isin(op_tid, sync_tid)
    if follower.any():
        by_process = _last_sync_before(op_pid, launch, syncs["global_pid"].to_numpy(np.int64), s0)
        own = np.where(follower, by_process, own)
    return own


def _last_sync_before(op_tid: np.ndarray, launch: np.ndarray, sync_tid: np.ndarray, s0: np.ndarray) -> np.ndarray:
    out = np.full(len(op_tid), -1, np.int64)
    for tid in np.unique(sync_tid):
        mine = np.flatnonzero(sync_tid == tid)  # already in start order
        rows = np.flatnonzero(op_tid == tid)
        k = np.searchsorted(s0[mine], launch[rows], side="left") - 1
        out[rows] = np.where(k >= 0, mine[np.clip(k, 0, None)], -1)
    return out


def _waits(syncs: pd.DataFrame, streams: dict, launch: np.ndarray) -> list[list[tuple[tuple[int, int, int], int]]]:
    """For each sync, the streams it waits on and how many of their ops (launched by its cutoff).

    Worked out per (process, device, scope) group with one binary search per stream, not per sync.
    """
    out: list[list[tuple[tuple[int, int, int], int]]] = [[] for _ in range(len(syncs))]
    groups = syncs.groupby(["global_pid", "device_id", "scope_stream_id"], sort=False).indices
    for (pid, device, scope), rows in groups.items():
        cutoffs = syncs["cutoff_ns"].to_numpy()[rows]
        for key, ops in streams.items():
            if key[0] == pid and key[1] == device and (scope < 0 or key[2] == scope):
                counts = np.searchsorted(launch[ops], cutoffs, side="right")
                for row, count in zip(rows.tolist(), counts.tolist()):
                    out[row].append((key, count))
    return out


def loop_sites(model: ReplayModel) -> dict[tuple[int, ...], float]:
    """The call sites of each kind of loop of reads in the replayed steps (the sites its reads come from), with
    its reads per step, the most read first."""
    inside = model.sync_loop >= 0
    pairs = np.unique(np.column_stack([model.sync_loop[inside], model.sync_site[inside]]), axis=0)
    reads = np.bincount(model.sync_loop[inside])
    found: dict[tuple[int, ...], float] = {}
    steps = max(len(model.steps.table), 1)
    bounds = np.flatnonzero(np.diff(pairs[:, 0])) + 1
    for part in np.split(pairs, bounds) if len(pairs) else []:  # once per loop: a few a step
        key = tuple(part[:, 1].tolist())
        found[key] = found.get(key, 0.0) + float(reads[part[0, 0]]) / steps
    return dict(sorted(found.items(), key=lambda item: -item[1]))
