"""The GPU's time in a timeline slice: where each GPU was busy, where it idled inside a sync's exposed-idle window
(and whose), and both binned for a chart a pixel a bin (nsync.report.timeline holds the results)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from nsync.report.timeline import ExposedSpans, GpuUtilisation

UTILISATION_BINS = 1500  # about a pixel each on a laptop screen


class GpuActivity(NamedTuple):
    """Each GPU's time in a slice, in order: busy (the union of its ops) or idle, an idle span with the sync whose
    exposed-idle window holds it (the window that began last; -1: no sync's). Columns."""

    device: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    busy: np.ndarray
    sync: np.ndarray  # an index into the slice's syncs, or -1


def gpu_activity(
    start: np.ndarray,
    end: np.ndarray,
    device: np.ndarray,
    span_ns: tuple[int, int],
    windows: tuple[np.ndarray, np.ndarray],
) -> GpuActivity:
    """Where each GPU was busy and where it idled over ``span_ns``, from its ops' ``start``, ``end`` and
    ``device``, and which sync's exposed-idle window (``windows``: starts, ends) each idle span lies in."""
    columns: list[list[int]] = [[], [], [], [], []]  # device, start, end, busy, sync
    for gpu in np.unique(device):  # a few GPUs at most
        spans = _device_activity(start[device == gpu], end[device == gpu], span_ns[0], span_ns[1], windows)
        columns[0] += [int(gpu)] * len(spans[0])
        for column, values in zip(columns[1:], spans):
            column += values.tolist()
    return GpuActivity(
        np.asarray(columns[0], np.int64),
        np.asarray(columns[1], np.int64),
        np.asarray(columns[2], np.int64),
        np.asarray(columns[3], bool),
        np.asarray(columns[4], np.int64),
    )


def exposed_spans(activity: GpuActivity) -> ExposedSpans:
    """The idle spans of ``activity`` inside a sync's window, in its order."""
    exposed = ~activity.busy & (activity.sync >= 0)
    return ExposedSpans(
        activity.start_ns[exposed].tolist(), activity.end_ns[exposed].tolist(), activity.sync[exposed].tolist()
    )


def gpu_utilisation(activity: GpuActivity, first_ns: int, last_ns: int, bins: int = UTILISATION_BINS) -> GpuUtilisation:
    """``activity`` in ``bins`` equal bins over [first_ns, last_ns]."""
    edges = np.linspace(first_ns, last_ns, bins + 1).round().astype(np.int64)
    start, end, busy, owner = activity.start_ns, activity.end_ns, activity.busy, activity.sync
    gpus = max(len(set(activity.device.tolist())), 1)
    width = np.maximum(np.diff(edges), 1) * gpus

    def share(chosen: np.ndarray) -> np.ndarray:
        """Per bin, the time of the chosen spans inside it: a difference of the running total's values."""
        s, e = start[chosen], end[chosen]
        points = np.concatenate([s, e])
        order = np.argsort(points, kind="stable")
        slope = np.concatenate([np.ones(len(s)), -np.ones(len(e))])[order].cumsum()  # spans open after each
        at = points[order]
        covered = np.concatenate([[0.0], np.cumsum(slope[:-1] * np.diff(at))]) if len(at) else np.zeros(0)
        total = np.interp(edges, at, covered) if len(at) else np.zeros(len(edges))
        return np.clip(np.diff(total) / width, 0.0, 1.0)

    exposed = ~busy & (owner >= 0)
    return GpuUtilisation(
        edges_ns=edges.tolist(),
        busy=np.round(share(busy), 4).tolist(),
        exposed=np.round(share(exposed), 4).tolist(),
        sync=_bin_syncs(edges, start[exposed], end[exposed], owner[exposed]).tolist(),
    )


def _bin_syncs(edges: np.ndarray, start: np.ndarray, end: np.ndarray, owner: np.ndarray) -> np.ndarray:
    """Each bin's sync: that of the exposed span over the bin's middle, else of the longest one that ends or
    begins inside it (-1: none)."""
    bins = len(edges) - 1
    found = np.full(bins, -1, np.int64)
    if not len(start):
        return found
    order = np.argsort(start, kind="stable")
    start, end, owner = start[order], end[order], owner[order]
    middle = (edges[:-1] + edges[1:]) // 2
    k = np.searchsorted(start, middle, side="right") - 1
    over = (k >= 0) & (end[np.maximum(k, 0)] > middle)
    found[over] = owner[k[over]]
    bin_of = np.clip(np.searchsorted(edges, (start + end) // 2, side="right") - 1, 0, bins - 1)
    by = np.lexsort((end - start, bin_of))  # by bin, the longest last
    last = np.r_[np.flatnonzero(np.diff(bin_of[by])), len(by) - 1]
    chosen_bins, chosen_owner = bin_of[by][last], owner[by][last]
    empty = found[chosen_bins] < 0
    found[chosen_bins[empty]] = chosen_owner[empty]
    return found


def _device_activity(
    start: np.ndarray, end: np.ndarray, first_ns: int, last_ns: int, windows: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(start, end, busy, sync) spans of one GPU over [first_ns, last_ns] (see Timeline.gpu_activity)."""
    order = np.argsort(start, kind="stable")
    start, end = start[order], end[order]
    reach = np.maximum.accumulate(end) if len(end) else end
    new = np.ones(len(start), bool)
    new[1:] = start[1:] > reach[:-1]
    busy_start = start[new]
    busy_end = reach[np.r_[np.flatnonzero(new)[1:] - 1, len(start) - 1]] if len(start) else reach
    edges = np.concatenate([[first_ns], busy_end])
    ends = np.concatenate([busy_start, [last_ns]])
    keep = ends > edges
    idle_start, idle_end = edges[keep], ends[keep]
    # idle spans cut where a sync's window begins or ends, each piece given the window that began last
    win_start, win_end = windows
    cuts = np.unique(np.concatenate([idle_start, idle_end, win_start, win_end]))
    gap = np.searchsorted(idle_start, cuts[:-1], side="right") - 1
    inside = (gap >= 0) & (cuts[1:] <= idle_end[np.maximum(gap, 0)]) if len(idle_start) else gap >= 0
    piece_start, piece_end = cuts[:-1][inside], cuts[1:][inside]
    owner = _latest_window(piece_start, win_start, win_end)
    # neighbouring pieces of one span and one window are one span again
    joined = np.ones(len(piece_start), bool)
    joined[1:] = (piece_start[1:] != piece_end[:-1]) | (owner[1:] != owner[:-1])
    heads = np.flatnonzero(joined)
    tails = np.r_[heads[1:] - 1, len(piece_start) - 1] if len(heads) else heads
    spans = (
        np.concatenate([busy_start, piece_start[heads]]),
        np.concatenate([busy_end, piece_end[tails]]),
        np.concatenate([np.ones(len(busy_start), np.int64), np.zeros(len(heads), np.int64)]),
        np.concatenate([np.full(len(busy_start), -1), owner[heads]]),
    )
    order = np.argsort(spans[0], kind="stable")
    return spans[0][order], spans[1][order], spans[2][order], spans[3][order]


def _latest_window(at: np.ndarray, win_start: np.ndarray, win_end: np.ndarray) -> np.ndarray:
    """For each time in ``at``, the index of the window holding it that began last (-1: none); in chunks,
    since a slice holds a few thousand pieces and a few hundred windows at most."""
    owner = np.full(len(at), -1, np.int64)
    if not len(win_start):
        return owner
    by_start = np.argsort(win_start, kind="stable")
    starts, ends = win_start[by_start], win_end[by_start]
    for first in range(0, len(at), 4096):
        t = at[first : first + 4096, None]
        holds = (starts[None, :] <= t) & (ends[None, :] > t)
        last = holds.shape[1] - 1 - np.argmax(holds[:, ::-1], axis=1)
        owner[first : first + 4096] = np.where(holds.any(axis=1), by_start[last], -1)
    return owner
