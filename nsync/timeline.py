"""Vectorised interval arithmetic over the GPU timeline: launches, busy union, running maxima.

All functions take and return numpy arrays of int64 nanoseconds; none loops per event.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pandas as pd


class BusyUnion:
    """The union of busy intervals on one device, queried for idle time in any window.

    ``busy_before(t)`` is the busy time in (-inf, t]; idle in [a, b] is (b - a) minus busy in it.
    """

    def __init__(self, starts: np.ndarray, ends: np.ndarray) -> None:
        s, e = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
        if len(s) and not (s[1:] >= s[:-1]).all():  # the callers' ops usually come sorted already
            order = np.argsort(s, kind="stable")
            s, e = s[order], e[order]
        if len(s):
            run_end = np.maximum.accumulate(e)
            new = np.empty(len(s), dtype=bool)
            new[0] = True
            new[1:] = s[1:] > run_end[:-1]
            self.starts = s[new]
            self.ends = np.maximum.reduceat(e, np.flatnonzero(new))
        else:
            self.starts = self.ends = np.zeros(0, np.int64)
        lengths = self.ends - self.starts
        self.cum_before = np.concatenate([[0], np.cumsum(lengths)])[:-1] if len(lengths) else lengths

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


def running_max_at(keys: np.ndarray, values: np.ndarray, queries: np.ndarray, side: str = "right") -> np.ndarray:
    """max(values[keys <= q]) for each query q (``side='left'``: keys < q); -1 when none.

    ``keys`` must be sorted. This is the workhorse for "latest GPU end among ops launched by t".
    """
    if not len(keys):
        return np.full(np.shape(queries), -1, np.int64)
    cummax = np.maximum.accumulate(np.asarray(values, np.int64))
    k = np.searchsorted(keys, queries, side=side) - 1
    return np.where(k >= 0, cummax[np.clip(k, 0, None)], -1)


def group_codes(*tables: Sequence[np.ndarray]) -> list[np.ndarray]:
    """One code per distinct combination of group columns (process, device, stream, thread...), the same
    combination getting the same code in every table. Each table is a list of equally long columns."""
    sizes = [len(columns[0]) for columns in tables]
    codes = np.zeros(sum(sizes), np.int64)
    for k, same_column in enumerate(zip(*tables)):
        column_codes, uniques = pd.factorize(np.concatenate([np.asarray(c, np.int64) for c in same_column]))
        # re-factorised so that codes stay below the row count however many columns there are
        codes = column_codes if k == 0 else pd.factorize(codes * len(uniques) + column_codes)[0]
    return np.split(codes.astype(np.int64), np.cumsum(sizes)[:-1])


class GroupedTimes:
    """Rows sorted by (group, time) once: "the latest row of my group at or before t" is then one binary
    search, and running maxima restart at each group. Groups are few (streams, threads), so loops run
    per group, never per row."""

    def __init__(self, codes: np.ndarray, times: np.ndarray) -> None:
        codes, times = np.asarray(codes, np.int64), np.asarray(times, np.int64)
        self.order = np.lexsort((times, codes))
        self.times = times[self.order]
        sorted_codes = codes[self.order]
        firsts = np.flatnonzero(np.concatenate([[True], sorted_codes[1:] != sorted_codes[:-1]])[: len(codes)])
        self.group_codes = sorted_codes[firsts]
        self.bounds = np.append(firsts, len(codes))

    def groups(self) -> Iterator[tuple[int, int, int]]:
        """(code, first, end) of each group's slice of the sorted rows."""
        for k, code in enumerate(self.group_codes.tolist()):
            yield code, int(self.bounds[k]), int(self.bounds[k + 1])

    def last_at(self, codes: np.ndarray, t: np.ndarray, side: str = "right") -> np.ndarray:
        """Sorted position of the latest row of each query's group with time <= t (< t with
        ``side='left'``), or -1 when there is none."""
        codes, t = np.asarray(codes, np.int64), np.asarray(t, np.int64)
        found = np.full(len(t), -1, np.int64)
        by_code = np.argsort(codes, kind="stable")
        sorted_query_codes = codes[by_code]
        for code, first, end in self.groups():
            lo, hi = np.searchsorted(sorted_query_codes, [code, code + 1])
            rows = by_code[lo:hi]
            k = np.searchsorted(self.times[first:end], t[rows], side=side) - 1
            found[rows] = np.where(k >= 0, first + k, -1)
        return found

    def running_max(self, values: np.ndarray) -> np.ndarray:
        """The running maximum of ``values`` (in the original row order) within each group, sorted."""
        ordered = np.asarray(values, np.int64)[self.order]
        for _code, first, end in self.groups():
            np.maximum.accumulate(ordered[first:end], out=ordered[first:end])
        return ordered
