"""One replay: the trace re-timed with some syncs released (the max-plus recurrence of nsync.stages.replay)."""

from __future__ import annotations

import numpy as np

from nsync.knowledge import PROFILER_GAP_NS
from nsync.stages.replay.model import REPLAY_CHUNK, ReplayModel, _Stream
from nsync.stages.steps import gpu_step_times


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
    call_first, busy_for, ready_after = _op_costs(model, released, vectorised, gap_ns)
    schedule = _Schedule(model, busy_for, ready_after, host_scale)
    shift, anchor = schedule.shift, schedule.anchor
    starts, ends = model.sync_start.tolist(), model.sync_end.tolist()
    own, prev_of, blocking = model.sync_own.tolist(), model.sync_prev.tolist(), (~released).tolist()
    resume_at, resume_cost = model.sync_release_at.tolist(), model.sync_release_cost.tolist()
    anchors = anchor.tolist()
    firsts = call_first.tolist()
    for k in range(len(starts)):  # scalars: this loop runs once per sync
        prev = prev_of[k]
        first = firsts[k]
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
            start = max(start, schedule.advance(key, count))
        shift[k] = start + own[k] - ends[k]
    for key, st in schedule.state.items():
        schedule.advance(key, len(st.ops))
    return schedule.new_end


def _op_costs(
    model: ReplayModel, released: np.ndarray, vectorised: bool, gap_ns: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each sync's call's first sync; each op's time on its stream (its duration and the gap folded in:
    end_i = max(ready_i - gap, end_{i-1}) + gap + duration_i) and its delay after its launch. An op removed with
    its released sync takes no time and waits for nothing: a read's copy, the GPU work a line's call launches
    between two of its syncs, and a loop's between its first read and its last when all its reads are released."""
    removed = model.op_removed_by >= 0
    removed[removed] = released[model.op_removed_by[removed]]
    call_first, goes_on = _released_calls(model, released, vectorised)
    goes_on = np.append(goes_on, False)  # the slot -1: no sync before the op
    removed |= goes_on[model.op_thread_sync]
    busy_for = np.where(removed, 0.0, model.op_dur + gap_ns)
    ready_after = np.where(removed, -np.inf, model.latency_ns - gap_ns)
    return call_first, busy_for, ready_after


class _Schedule:
    """Each stream's ops re-timed in launch order, as far as the syncs replayed so far need them: an op is ready
    at its launch moved by the shift of the sync its launch follows (``shift``: each sync's new end less its
    measured end; the last slot, -1, is "before any sync": 0), its host time since that sync scaled."""

    def __init__(self, model: ReplayModel, busy_for: np.ndarray, ready_after: np.ndarray, host_scale: float) -> None:
        self.model, self.ready_after, self.host_scale = model, ready_after, host_scale
        self.shift = np.zeros(len(model.sync_start) + 1)
        # where host time restarts: a sync's end, or (index -1) the replayed window's start
        self.anchor = np.append(model.sync_end.astype(float), float(model.window_start_ns))
        self.new_end = np.zeros(len(model.op_launch))
        self.state = {
            k: _Stream(rows, np.cumsum(busy_for[rows]), busy, best=busy)
            for k, rows in model.streams.items()
            for busy in [model.stream_busy_until.get(k, -np.inf)]
        }

    def ready(self, rows: np.ndarray) -> np.ndarray:
        seg = self.model.op_thread_sync[rows]
        anchor = self.anchor[seg]
        return (
            anchor + self.shift[seg] + self.host_scale * (self.model.op_launch[rows] - anchor) + self.ready_after[rows]
        )

    def advance(self, key: tuple[int, int, int], upto: int) -> float:
        """The replayed end of stream ``key``'s first ``upto`` ops, re-timing those not yet."""
        st = self.state[key]
        while upto > st.done:  # in chunks: the temporaries stay small however many ops a stream has
            stop = min(upto, st.done + REPLAY_CHUNK)
            rows = st.ops[st.done : stop]
            prev_sum = np.concatenate([[st.cum_dur[st.done - 1] if st.done else 0.0], st.cum_dur[st.done : stop - 1]])
            best = np.maximum.accumulate(np.concatenate([[st.best], self.ready(rows) - prev_sum]))[1:]
            self.new_end[rows] = st.cum_dur[st.done : stop] + best
            st.best, st.done = float(best[-1]), stop
        return float(self.new_end[st.ops[upto - 1]]) if upto else st.busy_until


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
