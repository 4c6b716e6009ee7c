"""Vectorised interval arithmetic over the GPU timeline: launches, busy union, running maxima.

All functions take and return numpy arrays of int64 nanoseconds; none loops per event.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from nsync.load import Trace


def ops_with_launch(trace: Trace) -> pd.DataFrame:
    """GPU ops joined to the API call that launched them (same process and correlationId).

    Adds launch_start, launch_end and launch_tid. An op whose call was not traced (nsys skips some
    APIs) gets its GPU start as launch time: it cannot have been launched later than that. The join is a
    sort and a binary search on one int64 key (process code, correlationId): no hash table of millions.
    """
    calls, ops = trace.api, trace.gpu_ops.copy()
    codes, _ = pd.factorize(np.concatenate([calls["global_pid"].to_numpy(), ops["global_pid"].to_numpy()]))
    call_key = (codes[: len(calls)].astype(np.int64) << 40) | calls["correlation_id"].to_numpy(np.int64)
    op_key = (codes[len(calls) :].astype(np.int64) << 40) | ops["correlation_id"].to_numpy(np.int64)
    gpu_start = ops["start"].to_numpy(np.int64)
    if len(calls) == 0:
        return ops.assign(launch_start=gpu_start, launch_end=gpu_start, launch_tid=np.full(len(ops), -1, np.int64))
    order = np.argsort(call_key, kind="stable")
    sorted_keys = call_key[order]
    pos = np.clip(np.searchsorted(sorted_keys, op_key), 0, len(sorted_keys) - 1)
    found = sorted_keys[pos] == op_key
    row = order[pos]
    ops["launch_start"] = np.where(found, calls["start"].to_numpy(np.int64)[row], gpu_start)
    ops["launch_end"] = np.where(found, calls["end"].to_numpy(np.int64)[row], gpu_start)
    ops["launch_tid"] = np.where(found, calls["global_tid"].to_numpy(np.int64)[row], -1)
    return ops


class BusyUnion:
    """The union of busy intervals on one device, queried for idle time in any window.

    ``busy_before(t)`` is the busy time in (-inf, t]; idle in [a, b] is (b - a) minus busy in it.
    """

    def __init__(self, starts: np.ndarray, ends: np.ndarray) -> None:
        order = np.argsort(starts, kind="stable")
        s, e = np.asarray(starts, np.int64)[order], np.asarray(ends, np.int64)[order]
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
