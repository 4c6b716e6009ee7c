"""What-if replay: re-time the trace with some syncs made non-blocking, and predict the step time.

The model (docs/how-it-works.md, §6):

- a host thread keeps its measured gaps: between two of its syncs every call and every launch moves by
  the same shift, the one its last sync left it with (a thread with no sync of its own, such as
  autograd's backward thread, moves with the last sync of any thread of its process);
- each stream runs its ops in launch order with their measured durations, none before its launch
  (plus the launch latency measured on this device when the stream was idle), an op queued behind another
  starting the GPU's dispatch gap after it (measured in the trace: about 1 µs on the H200, less the
  PROFILER_GAP_NS nsys adds to it, except in the replay of the trace as captured);
- a blocking sync ends at max(its new start + its own cost, the replayed end of what it waited for);
  a released sync ends at its new start + its own cost (the copies it implies stay on the stream),
  except a value read (``.item()``): keeping the value on the GPU removes the read, so the host goes on
  from where its copy call began (the copy call and the sync take no host time) and its copy leaves the stream;
- host time is scaled by the host scale (the profiler's slow-down undone), which a calibration fits to the
  program's unprofiled step, never above 1 / 1.1: nsys slows a host by 1.1 to 2.2 times;
- a loop of reads done at once (``vectorised``, _loops) takes its host time and GPU work between its first
  read and its last away, like one call of a line.

Each stream's schedule is the max-plus recurrence ``end_i = max(ready_i, end_{i-1} + gap) + duration_i``,
solved by slices with a cumulative maximum: ``end_i = S_i + max_{j<=i}(ready_j - gap - S_{j-1})`` where S is
the running sum of durations plus gaps (an op the fix removes adds nothing and waits for nothing). Syncs are
taken in time order (a loop over syncs, never over ops).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from nsync.keys import match_rows
from nsync.settings import setting
from nsync.stages.detect import SyncKind
from nsync.stages.steps import Steps, gpu_step_times, launched_in_steps
from nsync.stages.timeline import GroupedTimes, group_codes, neighbour_in_group

DEFAULT_LATENCY_NS = 5_000
# what nsys adds to each op queued behind another on the H200's GPU: 1.70-1.72 µs a queued one-element kernel
# unprofiled, 1.87-2.08 under nsync profile's flags, as the trace's rows say (0.93 run, 1.15 gap); the median
# over three kernels and two runs (fixtures/h200/profiler-cost/README.md, "The GPU between queued kernels")
PROFILER_GAP_NS = 190
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


def replay(
    model: ReplayModel,
    released: np.ndarray,
    host_scale: float = 1.0,
    vectorised: bool = False,
    captured: bool = False,
) -> np.ndarray:
    """Replayed GPU end of every op, with the syncs where ``released`` is true made non-blocking.

    ``host_scale`` stretches (or, below 1, compresses) the host's time since the sync an op or sync follows
    (its anchor): the profiler slows the host, and 1 keeps the host as captured. ``vectorised``: a loop of
    reads all released is done for all its items at once (_loops): its work between its first read and its
    last goes too. The GPU's dispatch gap is the unprofiled one (the trace's less PROFILER_GAP_NS) unless
    ``captured``: the trace as captured, to check the replay against it.
    """
    gap_ns = model.gap_ns if captured else max(model.gap_ns - PROFILER_GAP_NS, 0.0)
    # each sync's new end minus its measured end; the extra last slot (index -1) is "before any sync": 0
    shift = np.zeros(len(model.sync_start) + 1)
    # where host time restarts: a sync's end, or (index -1) the replayed window's start
    anchor = np.append(model.sync_end.astype(float), float(model.window_start_ns))
    new_end = np.zeros(len(model.op_launch))
    # the gap folded in: end_i = max(ready_i - gap, end_{i-1}) + gap + duration_i; an op removed with its
    # released sync takes no time and waits for nothing
    removed = model.op_removed_by >= 0
    removed[removed] = released[model.op_removed_by[removed]]
    # the GPU work a line's call launches between two of its syncs goes with the call, and a loop's between its
    # first read and its last with the loop, when all its reads are released
    call_first, goes_on = _released_calls(model, released, vectorised)
    goes_on = np.append(goes_on, False)  # the slot -1: no sync before the op
    removed |= goes_on[model.op_thread_sync]
    busy_for = np.where(removed, 0.0, model.op_dur + gap_ns)
    ready_after = np.where(removed, -np.inf, model.latency_ns - gap_ns)
    state = {
        k: _Stream(rows, np.cumsum(busy_for[rows]), busy, best=busy)
        for k, rows in model.streams.items()
        for busy in [model.stream_busy_until.get(k, -np.inf)]
    }

    def ready(rows: np.ndarray) -> np.ndarray:
        seg = model.op_thread_sync[rows]
        return anchor[seg] + shift[seg] + host_scale * (model.op_launch[rows] - anchor[seg]) + ready_after[rows]

    def advance(key: tuple[int, int, int], upto: int) -> float:
        st = state[key]
        while upto > st.done:  # in chunks: the temporaries stay small however many ops a stream has
            stop = min(upto, st.done + REPLAY_CHUNK)
            rows = st.ops[st.done : stop]
            prev_sum = np.concatenate([[st.cum_dur[st.done - 1] if st.done else 0.0], st.cum_dur[st.done : stop - 1]])
            best = np.maximum.accumulate(np.concatenate([[st.best], ready(rows) - prev_sum]))[1:]
            new_end[rows] = st.cum_dur[st.done : stop] + best
            st.best, st.done = float(best[-1]), stop
        return float(new_end[st.ops[upto - 1]]) if upto else st.busy_until

    starts, ends = model.sync_start.tolist(), model.sync_end.tolist()
    own, prev_of, blocking = model.sync_own.tolist(), model.sync_prev.tolist(), (~released).tolist()
    resume_at, resume_cost = model.sync_release_at.tolist(), model.sync_release_cost.tolist()
    anchors = anchor.tolist()
    call_first = call_first.tolist()
    for k in range(len(starts)):  # scalars: this loop runs once per sync
        prev = prev_of[k]
        first = call_first[k]
        if not blocking[k] and first != k:  # a later sync of a line's call: the call is gone, no time passes
            shift[k] = ends[first] + shift[first] - ends[k]
            continue
        if not blocking[k]:  # the host goes on: from the sync's start after its own cost, or past a read
            at = resume_at[k]
            resumed = anchors[prev] + shift[prev] + host_scale * (at - anchors[prev])
            shift[k] = resumed + resume_cost[k] - ends[k]
            continue
        start = anchors[prev] + shift[prev] + host_scale * (starts[k] - anchors[prev])
        for key, count in model.sync_waits[k]:  # wait for the GPU, then return after the call's own cost
            start = max(start, advance(key, count))
        shift[k] = start + own[k] - ends[k]
    for key, st in state.items():
        advance(key, len(st.ops))
    return new_end


def _released_calls(model: ReplayModel, released: np.ndarray, vectorised: bool) -> tuple[np.ndarray, np.ndarray]:
    """Each sync's first sync of the call it belongs to, and whether the next sync of its thread belongs to
    it too, for ``released``; ``vectorised``: a loop whose reads are all released is one call."""
    first, goes_on = model.sync_call_first, model.sync_call_goes_on & released
    loop = model.sync_loop
    inside = loop >= 0
    if not vectorised or not inside.any():
        return first, goes_on
    of = np.where(inside, loop, 0)  # each sync's loop (0 outside any: masked by ``inside``)
    held = np.bincount(loop[inside], weights=~released[inside], minlength=len(model.sync_loop_first)) == 0
    gone = inside & held[of]
    first = np.where(gone, model.sync_loop_first[of], first)
    goes_on = np.where(gone, np.arange(len(loop)) != model.sync_loop_last[of], goes_on)
    return first, goes_on


def step_times_ns(model: ReplayModel, new_end: np.ndarray) -> np.ndarray:
    """The replayed steps' GPU step times, measured as the analysis measures them, for replayed op ends."""
    return gpu_step_times(model.steps, model.op_in_steps, new_end - model.op_dur, new_end)


# A replay is a loop over syncs (about 20 µs each): at most this many sync-replays per analysis. Every call
# site is replayed over a run of analysed steps in the middle (MAX_REPLAY_STEPS: the median of that many is
# steady), fewer where that is too many sync-replays (at least MIN_REPLAY_STEPS), and if even that is too
# many, the call sites costliest in exposed idle that fit.
REPLAY_BUDGET = 150_000
MAX_REPLAY_STEPS = 200
MIN_REPLAY_STEPS = 8


class LoopSaving(NamedTuple):
    """A loop of reads (_loops) done for all its items at once: its call sites, the saving per step and its
    span (loop_saving), and the loop's reads per replayed step."""

    sites: tuple[int, ...]
    saving_ns: float
    span_ns: tuple[float, float]
    reads_per_step: float


# How far a loop's point lies from its reads released (0) to the whole loop gone (1), with the point a mean over
# the host scales: chosen on the measured fixes of the sessions before fixtures/fresh8 (16 of them do a loop at
# once), scored on fresh8 and fresh9 (0.5 before; fixtures/h200/README.md, "A loop done at once")
LOOP_GONE_SHARE = 0.6


def loop_saving(
    kept_ns: np.ndarray, vectorised_ns: np.ndarray, weights: np.ndarray
) -> tuple[float, tuple[float, float]]:
    """A loop's saving and its span, from its replays at each host scale (the fitted first) with its reads
    released (``kept_ns``: the loop stays) and with the loop vectorised (``vectorised_ns``: its host time gone at
    the host scale). The fix takes away at least the reads' waits and at most the whole loop; but nsys slows a
    loop of CUDA calls more than the rest of the host that the host scale is fitted to, so the whole loop at the
    host scale overstates it (+34 to +98 % on the vectorised fixes measured: fixtures/h200/README.md). The
    point lies LOOP_GONE_SHARE of the way from the first to the second, its mean over the host scales
    (``weights``: scale_weights); the span runs from the least of the two to the largest."""
    between = kept_ns + LOOP_GONE_SHARE * (vectorised_ns - kept_ns)
    return float(weights @ between), (float(min(kept_ns.min(), between.min())), float(vectorised_ns.max()))


# Separate unprofiled runs of one program: the standard deviation of their steps' logarithms, a median 11.7 %
# (fixtures/h200/measure); and the ends of a calibrated saving's range: another run's step 1.25 times shorter and
# longer (AnalysisConfig.calibration_spread's default).
RUN_STEP_SPREAD = 0.117
RANGE_END_STEP = 1.25
# the point saving's weight at the fitted host scale (the other scales share the rest): 0.725
FITTED_SCALE_WEIGHT = 1 - (RUN_STEP_SPREAD / np.log(RANGE_END_STEP)) ** 2


def scale_weights(count: int) -> np.ndarray:
    """The weights of a saving's replays at ``count`` host scales (the fitted first) in its point: the mean
    saving over the host speeds another run may have, not the saving at the fitted one alone. A saving is far
    from linear in the host's speed (it peaks where host and GPU balance and falls off on either side), and a
    measured saving is a mean over steps and runs whose host speed varies. With one scale each side: three-point
    Gauss-Hermite for a run's step spread log-normally by RUN_STEP_SPREAD, the nodes at the range's ends
    (each end's weight RUN_STEP_SPREAD² / (2 ln² RANGE_END_STEP)); more scales (a calibration that did not hold
    adds the uncalibrated range's) share the same rest. fixtures/h200/README.md, "The point"."""
    if count == 1:
        return np.ones(1)
    return np.array([FITTED_SCALE_WEIGHT] + [(1 - FITTED_SCALE_WEIGHT) / (count - 1)] * (count - 1))


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


@dataclass(frozen=True)
class WhatIf:
    """Predicted step times: the trace replayed as captured, then with the host's time scaled back to an
    unprofiled run (``host_scale``) as it is, without each call site's syncs, and without any."""

    replayed_step_ns: float  # as captured: checks the model against the trace itself
    unprofiled_step_ns: float  # as it is, host time scaled
    # the step as it is less the saving of every sync (each saving being its mean over ``scales``)
    without_syncs_step_ns: float
    saving_ns: dict[int, float]  # site_id -> predicted saving per step (host time scaled)
    latency_ns: float
    host_scale: float  # fitted when calibrated
    replayed_steps: tuple[int, int]  # [first, stop) among the analysed steps
    sites_left_out: int = 0  # call sites not replayed (too many sync-replays)
    calibrated_steps_ns: np.ndarray | None = None  # the program's own unprofiled steps (calibration run), if known
    calibration_note: str = ""  # how the calibration was applied
    group_saving_ns: tuple[float, ...] = ()  # per group of call sites released together (what_if's ``groups``)
    # each saving's least and largest value over the host scales the run may have had (``scales``)
    saving_span_ns: dict[int, tuple[float, float]] = field(default_factory=dict)
    group_saving_span_ns: tuple[tuple[float, float], ...] = ()
    all_syncs_span_ns: tuple[float, float] = (0.0, 0.0)
    own_saving_ns: float = 0.0  # every sync issued in the program's own code released together (``own_sites``)
    own_span_ns: tuple[float, float] = (0.0, 0.0)
    scales: tuple[float, ...] = ()  # the host scales replayed: host_scale first, then the others it may be
    # calibrated: the step as it is with a host ``host_speed_spread`` faster and slower than the calibration run's
    host_speed_steps_ns: tuple[float, float] | None = None
    calibration_runs: int = 1  # the calibration's runs (their steps pooled)
    loops: tuple[LoopSaving, ...] = ()  # each loop of reads done for all its items at once

    @property
    def all_syncs_saving_ns(self) -> float:
        return self.unprofiled_step_ns - self.without_syncs_step_ns

    @property
    def calibrated(self) -> bool:
        return self.calibrated_steps_ns is not None

    @property
    def between_runs_pct(self) -> float:
        """How far the step may stray in another unprofiled run on the same machine, % (half the span of
        ``host_speed_steps_ns``, over the square root of the calibration's runs); 0 uncalibrated."""
        if self.host_speed_steps_ns is None or not self.unprofiled_step_ns > 0:
            return 0.0
        faster, slower = self.host_speed_steps_ns
        return 100 * (slower - faster) / 2 / self.unprofiled_step_ns / self.calibration_runs**0.5

    @property
    def calibrated_step_ns(self) -> float | None:
        """The program's median unprofiled step, which the host scale was fitted to."""
        return None if self.calibrated_steps_ns is None else _median(self.calibrated_steps_ns)

    @property
    def note(self) -> str:
        if self.calibrated:
            return (
                f"calibrated: host time scaled by {self.host_scale:.3g}, fitted to this program's unprofiled run "
                f"({self.calibration_note}); savings are estimates"
            )
        return (
            f"uncalibrated: host time scaled by {self.host_scale:g}, nsys's slow-down measured on an H200 "
            "(nsync profile calibrates each run); savings are estimates"
        )


def _median(values: np.ndarray) -> float:
    values = values[np.isfinite(values)]
    return float(np.median(values)) if len(values) else float("nan")


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


FIT_REPLAYS = 14  # replays of the host-scale fit: both ends of SCALE_RANGE, then 12 bisection steps
SCALE_RANGE = (0.05, 1.25)
FIT_TOLERANCE = 0.005  # a replayed step within 0.5 % of the target fits
# nsys slows the host's own work by 1.1 to 2.2 times: a fit beyond 1 / 1.1 says the calibration run was slow
PROFILED_HOST_SCALE_MAX = 1 / 1.1


class HostScaleFit(NamedTuple):
    """A host scale, how it was found, and whether a calibration bounds it (``held``): not where there is none,
    nor where its run was slower than the profiler can explain (or its GPU was)."""

    scale: float
    note: str
    held: bool = True


def fit_host_scale(predict: Callable[[float], float], target_ns: float, uncalibrated: float) -> HostScaleFit:
    """The host scale whose replay (``predict``, non-decreasing in the scale) runs at ``target_ns``, the
    program's unprofiled step, and a note on how it was found.

    Where the replay cannot run that fast (the GPU bounds it), the calibration only says the host is at
    least as fast as the edge of that bound: the scale is the edge, or the uncalibrated one if lower."""
    low, high = SCALE_RANGE
    fastest, slowest = predict(low), predict(high)
    if slowest < target_ns:  # even a host slower than under nsys leaves the replay faster: the GPU was slower
        return HostScaleFit(
            uncalibrated,
            f"the unprofiled run ({target_ns / 1e6:.3f} ms a step) was slower than the capture replayed at any "
            f"host speed ({slowest / 1e6:.3f} ms): its GPU ran slower, so the host scale stays {uncalibrated:g}",
            held=False,
        )
    goal = max(target_ns, fastest) * (1 + FIT_TOLERANCE)
    for _ in range(FIT_REPLAYS - 2):  # the largest scale whose replay stays within the goal
        middle = (low + high) / 2
        low, high = (middle, high) if predict(middle) <= goal else (low, middle)
    if fastest <= target_ns * (1 + FIT_TOLERANCE):
        if low > PROFILED_HOST_SCALE_MAX:
            return HostScaleFit(
                PROFILED_HOST_SCALE_MAX,
                f"the unprofiled run ({target_ns / 1e6:.3f} ms a step) fits a host slower than the profiler ever "
                f"leaves one (host scale {low:.3g}): that run's host was slow, so the scale is capped at "
                f"{PROFILED_HOST_SCALE_MAX:.3g} and the likely range takes in the uncalibrated host scales",
                held=False,
            )
        return HostScaleFit(low, f"the replay matches its unprofiled step ({target_ns / 1e6:.3f} ms)")
    scale = min(low, uncalibrated)
    return HostScaleFit(
        scale,
        f"the GPU bounds the replay at {fastest / 1e6:.3f} ms a step, above the unprofiled "
        f"{target_ns / 1e6:.3f} ms: the host scale is at most {low:.3g}, {scale:.3g} used",
    )


# what the what-if adds to each call site: its predicted saving per step and the saving's likely range
SAVING_COLUMNS = (
    "predicted_saving_ns_per_step",
    "predicted_saving_ns_per_step_low",
    "predicted_saving_ns_per_step_high",
)

# what the what-if adds to each call site in a loop of reads: which loop (its index in WhatIf.loops), the loop's
# saving done for all items at once, and its range
LOOP_COLUMNS = ("loop_id", "loop_saving_ns_per_step", "loop_saving_ns_per_step_low", "loop_saving_ns_per_step_high")


def saving_range(least: Any, largest: Any, ratio: tuple[float, float]) -> tuple[Any, Any]:
    """A predicted saving's likely range: from ``ratio[0]`` times the least it is at any host scale the run
    may have had to ``ratio[1]`` times the largest (AnalysisConfig.saving_ratio), in their unit; numbers or
    arrays of them (NaN stays NaN)."""
    ends = [np.multiply(value, r) for value in (least, largest) for r in ratio]
    return np.minimum.reduce(ends), np.maximum.reduce(ends)


def other_scales(
    predict: Callable[[float], float],
    fit: HostScaleFit,
    target_ns: float | None,
    spread: float,
    scale_range: tuple[float, ...],
) -> tuple[float, ...]:
    """The other host scales the run may have had beside ``fit``'s: fitted to another run's unprofiled step,
    ``spread`` times faster or slower than the calibration run's (``target_ns``; a run slower than any host
    scale can replay: the slowest host the profiler leaves, 1 / 1.1), and, where no calibration holds, the
    ends of the range of scales fitted on real and lab programs."""
    fitted = () if target_ns is None else (
        fit_host_scale(predict, target_ns / spread, fit.scale).scale,
        fit_host_scale(predict, target_ns * spread, PROFILED_HOST_SCALE_MAX).scale,
    )  # fmt: skip
    unbounded = () if fit.held else scale_range
    return tuple(s for s in dict.fromkeys((*fitted, *unbounded)) if s != fit.scale)


REPLAY_AGREES = 2.0  # the replay as captured within this factor of the measured steps, or no what-if


class ReplaySkipped(Exception):
    """Why the what-if was not replayed (said to the user as a warning)."""


def what_if(
    ops: pd.DataFrame,
    syncs: pd.DataFrame,
    steps: Steps,
    callsites: pd.DataFrame,
    host_scale: float,
    calibrated_steps_ns: np.ndarray | None = None,
    groups: list[list[int]] | None = None,
    spread: float = 1.0,
    scale_range: tuple[float, ...] = (),
    own_sites: list[int] | None = None,
    host_speed_spread: float = 0.0,
    calibration_runs: int = 1,
) -> WhatIf:
    """Replay each call site of ``callsites`` (its syncs released), each of ``groups`` (lists of site ids
    released together), and all at once; ReplaySkipped says why not. ``syncs``: every detected sync, with
    ``site_id``. ``calibrated_steps_ns``: the program's unprofiled steps, whose median the host scale is then
    fitted to (``host_scale`` otherwise). Every saving is also replayed at the other host scales the run may
    have had (other_scales: ``spread``, ``scale_range``), which give its span. ``own_sites``: the sites whose
    syncs the program's own code issues, released together too (all sites if None). ``host_speed_spread``:
    calibrated, the step as it is is also replayed with the host that much faster and slower, the calibration
    being of ``calibration_runs`` runs."""
    groups = groups or []
    if steps.count < 2:
        raise ReplaySkipped("what-if replay needs steps")
    sync_start = syncs["start"].to_numpy(np.int64)
    calibrated = calibrated_steps_ns is not None
    # host scales beside the fitted: a faster and a slower run's, and the range where a calibration did not hold
    alternatives = 2 + len(scale_range) if calibrated else len(scale_range)
    fits = FIT_REPLAYS * 3 if calibrated else 0
    scale_count = 1 + alternatives
    # each loop of reads is replayed twice more (its reads released, then it vectorised): at most one loop per
    # site read that often a step
    loops_at_most = int((callsites["syncs_per_step"].astype(float) >= LOOP_MIN_READS).sum()) if len(callsites) else 0
    speeds = 2 if calibrated and host_speed_spread > 0 else 0
    replays = (len(callsites) + len(groups) + 2 * loops_at_most + 3) * scale_count + 1 + fits + speeds
    first, stop = replay_span(steps, sync_start, replays)
    replayed = steps.analysed.iloc[first:stop]
    window = sync_start[(sync_start >= replayed["start"].iloc[0]) & (sync_start < replayed["end"].iloc[-1])]
    sites_fit = (REPLAY_BUDGET // max(len(window), 1) - 1 - fits - speeds) // scale_count - 3 - len(groups)
    if sites_fit < 1:
        raise ReplaySkipped(
            f"what-if replay skipped: {len(window)} syncs in {stop - first} steps are too many to replay "
            f"(analyse a part of the capture: {setting('AnalysisConfig.window_s')})"
        )
    model = prepare(ops, syncs, Steps(table=replayed, source=steps.source, warmup=0))
    none = np.zeros(len(model.sync_start), bool)

    # each replay once: the fits and the savings share the trace as it is, a loop of one site its kept replay with
    # the site's, the own syncs theirs with all syncs' where the program issues them all
    done: dict[tuple[bytes, float, bool], float] = {}

    def predict(released: np.ndarray, scale: float, vectorised: bool = False) -> float:
        key = (np.packbits(released).tobytes(), scale, vectorised)
        if key not in done:
            done[key] = _median(step_times_ns(model, replay(model, released, scale, vectorised)))
        return done[key]

    def predict_as_is(scale: float) -> float:
        return predict(none, scale)

    as_captured = _median(step_times_ns(model, replay(model, none, captured=True)))
    if not np.isfinite(as_captured):
        raise ReplaySkipped("what-if replay skipped: the analysed steps hold no GPU work to replay")
    measured = _median((replayed["end"] - replayed["start"]).to_numpy(np.int64))
    if not measured / REPLAY_AGREES < as_captured < measured * REPLAY_AGREES:
        # the replay of the trace as it is keeps within 6 % of its steps on every real export here
        raise ReplaySkipped(
            f"what-if replay skipped: the trace replayed as captured takes {as_captured / 1e6:.3f} ms a step where "
            f"its steps measure {measured / 1e6:.3f} ms: its GPU rows and its steps disagree (a damaged export?)"
        )
    target_ns = None if calibrated_steps_ns is None else _median(calibrated_steps_ns)
    fit = HostScaleFit(host_scale, "", held=False)  # uncalibrated
    if target_ns is not None:
        fit = fit_host_scale(predict_as_is, target_ns, host_scale)
    host_scale = fit.scale
    scales = (host_scale, *other_scales(predict_as_is, fit, target_ns, spread, scale_range))
    # the budget again with the host scales the fit left (the span was chosen for the most it could leave)
    sites_fit = (REPLAY_BUDGET // max(len(window), 1) - 1 - fits - speeds) // len(scales) - 3 - len(groups)
    # the loops of the program's own code (one inside a library is no loop of the user's to do at once)
    loops = {
        sites: reads for sites, reads in loop_sites(model).items() if own_sites is None or set(sites) <= set(own_sites)
    }
    loops = dict(list(loops.items())[: max(sites_fit - 1, 0) // 2])  # the budget's last replays: sites first
    sites_fit = max(sites_fit - 2 * len(loops), 1)
    replayed_sites = [
        int(site) for site in callsites.sort_values("exposed_idle_ns", ascending=False).head(sites_fit)["site_id"]
    ]
    released = [model.sync_site == site for site in replayed_sites] + [np.isin(model.sync_site, g) for g in groups]
    own = ~none if own_sites is None else np.isin(model.sync_site, own_sites)
    steps_at = np.array(
        [
            [predict_as_is(scale)]
            + [predict(r, scale) for r in [~none, *released, own]]
            + [
                predict(np.isin(model.sync_site, loop), scale, vectorised)
                for loop in loops
                for vectorised in (False, True)
            ]
            for scale in scales
        ]
    )
    saved = steps_at[:, :1] - steps_at[:, 1:]  # per scale: all syncs, each site, each group, the own syncs, loops
    weights = scale_weights(len(scales))
    point = weights @ saved  # each saving's mean over the host scales
    least, largest = saved.min(axis=0), saved.max(axis=0)
    spans = list(zip(least.tolist(), largest.tolist()))
    sites = len(replayed_sites)
    own_at = saved.shape[1] - 2 * len(loops) - 1
    return WhatIf(
        replayed_step_ns=as_captured,
        unprofiled_step_ns=float(steps_at[0, 0]),
        without_syncs_step_ns=float(steps_at[0, 0] - point[0]),
        saving_ns=dict(zip(replayed_sites, point[1 : 1 + sites].tolist())),
        latency_ns=model.latency_ns,
        host_scale=host_scale,
        replayed_steps=(first, stop),
        sites_left_out=len(callsites) - sites,
        calibrated_steps_ns=calibrated_steps_ns,
        calibration_note=fit.note,
        group_saving_ns=tuple(point[1 + sites : own_at].tolist()),
        saving_span_ns=dict(zip(replayed_sites, spans[1 : 1 + sites])),
        group_saving_span_ns=tuple(spans[1 + sites : own_at]),
        all_syncs_span_ns=spans[0],
        own_saving_ns=float(point[own_at]),
        own_span_ns=spans[own_at],
        scales=scales,
        host_speed_steps_ns=(
            (predict_as_is(host_scale / (1 + host_speed_spread)), predict_as_is(host_scale * (1 + host_speed_spread)))
            if speeds
            else None
        ),
        calibration_runs=calibration_runs,
        loops=tuple(
            LoopSaving(sites, *loop_saving(saved[:, k], saved[:, k + 1], weights), reads)
            for k, (sites, reads) in zip(range(own_at + 1, saved.shape[1], 2), loops.items())
        ),
    )
