"""Vectorised interval arithmetic over the GPU timeline: launches, busy union, running maxima.

All functions take and return numpy arrays of int64 nanoseconds; none loops per event.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Literal

import numpy as np

from nsync.keys import dense_codes


class BusyUnion:
    """The union of busy intervals on one device, queried for idle time in any window.

    ``busy_before(t)`` is the busy time in (-inf, t]; idle in [a, b] is (b - a) minus busy in it.
    Built from millions of ops with a few passes and no array beyond the sorted input and the result.
    """

    def __init__(self, starts: np.ndarray, ends: np.ndarray) -> None:
        s, e = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
        if not len(s):
            self.starts = self.ends = self.cum_before = np.zeros(0, np.int64)
            return
        if not (s[1:] >= s[:-1]).all():  # the callers' ops are usually sorted runs already
            order = np.argsort(s, kind="stable")
            s, e = s[order], e[order]
            del order
        run_end = np.maximum.accumulate(e)
        first = np.empty(len(s), bool)  # first op of each busy interval
        first[0] = True
        np.greater(s[1:], run_end[:-1], out=first[1:])
        last = np.roll(first, -1)  # an interval ends where the next begins; its end is the running max
        self.starts, self.ends = s[first], run_end[last]
        del run_end, first, last
        self.cum_before = np.zeros(len(self.starts), np.int64)
        np.cumsum((self.ends - self.starts)[:-1], out=self.cum_before[1:])

    def busy_before(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, np.int64)
        if not len(self.starts):
            return np.zeros(t.shape, np.int64)
        k = np.searchsorted(self.starts, t, side="right") - 1
        kc = np.clip(k, 0, None)
        inside = np.clip(t - self.starts[kc], 0, self.ends[kc] - self.starts[kc])
        return np.where(k >= 0, self.cum_before[kc] + inside, 0)

    def idle_between(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
        b = np.maximum(a, b)
        return (b - a) - (self.busy_before(b) - self.busy_before(a))

    @property
    def total_busy(self) -> int:
        return int((self.ends - self.starts).sum())

    def idle_once(self, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """The idle in each window [start, end), each idle nanosecond counted for one window only: the one
        that began last among those holding it (windows of several threads can overlap; one thread's never
        do). The windows' figures then add up to the idle in their union, never more."""
        start, end = np.asarray(start, np.int64), np.asarray(end, np.int64)
        out = np.zeros(len(start), np.int64)
        rows = np.flatnonzero(end > start)
        if not len(rows):
            return out
        rows = rows[np.argsort(start[rows], kind="stable")]
        s, e = start[rows], end[rows]
        cuts = np.unique(np.concatenate([s, e]))
        owner = latest_holding(s, e, cuts[:-1])
        held = owner >= 0
        idle = self.idle_between(cuts[:-1][held], cuts[1:][held])
        out[rows] = np.bincount(owner[held], weights=idle, minlength=len(rows)).round().astype(np.int64)
        return out


Side = Literal["left", "right"]  # numpy.searchsorted's


def latest_at(keys: np.ndarray, values: np.ndarray, queries: np.ndarray, side: Side = "right") -> np.ndarray:
    """The value of the latest key <= q for each query q (``side='left'``: < q); -1 when none.

    ``keys`` must be sorted: "the op a thread launched last before t", "the call just before a sync".
    """
    if not len(keys):
        return np.full(np.shape(queries), -1, np.int64)
    k = np.searchsorted(keys, queries, side=side) - 1
    return np.where(k >= 0, np.asarray(values)[np.clip(k, 0, None)], -1)


def latest_holding(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """For each time t, the last window (in ``starts`` order, which must be sorted) with start <= t < end;
    -1 when none. Binary lifting over a table of the windows' largest ends in blocks of 2**k, so that
    nested and overlapping windows cost log(n) vectorised passes, not a loop per window."""
    n = len(starts)
    t = np.asarray(t, np.int64)
    if not n:
        return np.full(t.shape, -1, np.int64)
    levels = [np.asarray(ends, np.int64)]  # levels[k][i]: the largest end among windows i .. i + 2**k - 1
    while (1 << len(levels)) <= n:
        half, previous = 1 << (len(levels) - 1), levels[-1]
        levels.append(np.maximum(previous[:-half], previous[half:]))
    position = np.searchsorted(starts, t, side="right")  # windows before this one start at or before t
    for k in range(len(levels) - 1, -1, -1):  # skip, from the right, blocks of windows that all ended by t
        first = position - (1 << k)
        can = first >= 0
        block_end = np.where(can, levels[k][np.clip(first, 0, len(levels[k]) - 1)], np.iinfo(np.int64).max)
        position = np.where(can & (block_end <= t), first, position)
    found = position - 1
    return np.where((found >= 0) & (np.asarray(ends)[np.clip(found, 0, None)] > t), found, -1)


def running_max_at(keys: np.ndarray, values: np.ndarray, queries: np.ndarray, side: Side = "right") -> np.ndarray:
    """max(values[keys <= q]) for each query q (``side='left'``: keys < q); -1 when none.

    ``keys`` must be sorted. This is the workhorse for "latest GPU end among ops launched by t".
    """
    running = np.maximum.accumulate(np.asarray(values, np.int64)) if len(keys) else values
    return latest_at(keys, running, queries, side)


def group_codes(*tables: Sequence[np.ndarray]) -> list[np.ndarray]:
    """One code per distinct combination of group columns (process, device, stream, thread...), the same
    combination getting the same code in every table. Each table is a list of equally long columns.
    Codes run from 0 to the number of combinations - 1."""
    sizes = [len(columns[0]) for columns in tables]
    codes = np.zeros(sum(sizes), np.int64)
    for k, same_column in enumerate(zip(*tables)):
        column = same_column[0] if len(same_column) == 1 else np.concatenate(same_column)
        column_codes, uniques = dense_codes(column)
        # re-coded so that codes stay below the row count however many columns there are
        codes = column_codes if k == 0 else dense_codes(codes * len(uniques) + column_codes)[0]
    return np.split(codes, np.cumsum(sizes)[:-1])


def neighbour_in_group(keys: np.ndarray, step: int) -> np.ndarray:
    """For each row, the row ``step`` places after it (negative: before it) among the rows with its key, in row
    order (syncs in start order: the next or the previous sync of the same thread), or -1."""
    keys = np.asarray(keys)
    order = np.argsort(keys, kind="stable")  # each key's rows together, in row order
    out = np.full(len(keys), -1, np.int64)
    if 0 < abs(step) < len(keys):
        here, there = (order[:-step], order[step:]) if step > 0 else (order[-step:], order[:step])
        same = keys[here] == keys[there]
        out[here[same]] = there[same]
    return out


class GroupedTimes:
    """Rows sorted by (group, time) once, and each group's slice of them. Groups are few (streams), so
    loops run per group, never per row. ``codes`` come from :func:`group_codes`."""

    def __init__(self, codes: np.ndarray, times: np.ndarray) -> None:
        codes, times = np.asarray(codes, np.int64), np.asarray(times, np.int64)
        counts = np.bincount(codes)
        if np.count_nonzero(counts) <= 1:  # one group, the usual case: sorted by time alone
            self.order = np.argsort(times, kind="stable")
        else:
            self.order = np.lexsort((times, codes))
        self.group_codes = np.flatnonzero(counts)
        self.bounds = np.concatenate([[0], np.cumsum(counts[self.group_codes])])

    def groups(self) -> Iterator[tuple[int, int, int]]:
        """(code, first, end) of each group's slice of the sorted rows."""
        for k, code in enumerate(self.group_codes.tolist()):
            yield code, int(self.bounds[k]), int(self.bounds[k + 1])


MAX_SCANS = 16  # keys found by a pass over the ops each; more keys share one sort of the ops by key


def rows_by_key(
    op_columns: Sequence[np.ndarray], query_columns: Sequence[np.ndarray], times: np.ndarray
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """For each distinct key (a value per column) among the queries, the query rows that have it and the
    op rows that have it, in ``times`` order.

    Queries are syncs or their threads, whose keys are usually few: then only the ops of those keys are
    copied and sorted, because at millions of ops sorting the whole table by (key, time) needs several
    times its memory. Past MAX_SCANS keys, one such sort is cheaper than a pass per key.
    """
    if not len(query_columns[0]):
        return
    (query_codes,) = group_codes(query_columns)
    query_rows = np.argsort(query_codes, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(query_codes))])
    keys = [column[query_rows[bounds[:-1]]] for column in query_columns]  # one value per key and column
    find = _rows_by_scan if len(keys[0]) <= MAX_SCANS else _rows_by_sort
    for first, stop, rows in zip(bounds[:-1].tolist(), bounds[1:].tolist(), find(op_columns, keys)):
        yield query_rows[first:stop], rows[np.argsort(times[rows], kind="stable")]


def _rows_by_scan(op_columns: Sequence[np.ndarray], keys: Sequence[np.ndarray]) -> Iterator[np.ndarray]:
    for k in range(len(keys[0])):
        match = np.ones(len(op_columns[0]), bool)
        for op_column, key_column in zip(op_columns, keys):
            match &= op_column == key_column[k]
        yield np.flatnonzero(match)


def _rows_by_sort(op_columns: Sequence[np.ndarray], keys: Sequence[np.ndarray]) -> Iterator[np.ndarray]:
    op_codes, key_codes = group_codes(op_columns, keys)
    order = np.argsort(op_codes, kind="stable")
    sorted_codes = op_codes[order]
    firsts, stops = np.searchsorted(sorted_codes, key_codes, "left"), np.searchsorted(sorted_codes, key_codes, "right")
    for first, stop in zip(firsts.tolist(), stops.tolist()):
        yield order[first:stop]
