"""A small slice of the timeline around representative steps, for reports to draw.

Reports never see the trace: the analysis keeps this excerpt (a few thousand rows at most), chosen as the
median-length step and its neighbours, or the neighbourhood of the costliest sync when there are no steps, with
the GPU's time in it binned for the chart (nsync.stages.activity).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from nsync.load import Trace, thread_labels
from nsync.report.timeline import ExposedSpans, GpuUtilisation
from nsync.stages.activity import exposed_spans, gpu_activity, gpu_utilisation
from nsync.stages.attribute import LeadCurve
from nsync.stages.steps import Steps

MAX_OPS = 6000
MAX_CALLS = 6000
CONTEXT_NS = 5_000_000  # around the costliest sync when there are no steps


@dataclass(frozen=True)
class TimelineExcerpt:
    """Rows inside [start_ns, end_ns]: GPU ops, CUDA calls of the syncing threads, syncs, lead samples."""

    start_ns: int
    end_ns: int
    ops: pd.DataFrame  # start, end, device_id, stream_id, op, name, bytes
    calls: pd.DataFrame  # start, end, global_tid, api
    syncs: pd.DataFrame  # start, end, global_tid, kind, exposed_start_ns, rebuild_ns, exposed_idle_ns, file, ...
    lead: pd.DataFrame  # t, lead_ns, global_tid
    description: str
    thread_labels: dict[int, str]  # every host thread in calls, syncs and lead: "MainThread (4242)"
    median_step_ns: tuple[int, int] | None  # the median-length step, inside the slice
    exposed: ExposedSpans  # the GPU's idle spans inside a sync's window (nsync.stages.activity)
    utilisation: GpuUtilisation | None  # the whole slice binned (None: no GPU op in it)
    step_utilisation: GpuUtilisation | None  # the median step binned


def choose_window(steps: Steps, syncs: pd.DataFrame, window: tuple[int, int]) -> tuple[int, int, str]:
    analysed = steps.analysed.reset_index(drop=True)
    k = steps.median_index()
    if k is not None:
        first, last = max(0, k - 1), min(len(analysed) - 1, k + 1)
        return (
            int(analysed["start"][first]),
            int(analysed["end"][last]),
            f"steps {first + steps.warmup + 1}-{last + steps.warmup + 1} of the analysed "
            f"{steps.warmup + 1}-{len(steps.table)} (the median-length step and its neighbours)",
        )
    if len(syncs):
        worst = syncs.loc[syncs["exposed_idle_ns"].idxmax()]
        return (
            max(window[0], int(worst["start"]) - CONTEXT_NS),
            min(window[1], int(worst["rebuild_ns"]) + CONTEXT_NS),
            "around the costliest sync (no steps in this trace)",
        )
    return window[0], min(window[1], window[0] + 4 * CONTEXT_NS), "the start of the trace (no steps, no syncs)"


def timeline_excerpt(
    trace: Trace,
    ops: pd.DataFrame,
    syncs: pd.DataFrame,
    steps: Steps,
    window: tuple[int, int],
    curves: dict[int, LeadCurve],
) -> TimelineExcerpt:
    t0, t1, description = choose_window(steps, syncs, window)
    shown = ops.loc[(ops["end"] > t0) & (ops["start"] < t1)].sort_values("start")
    truncated = len(shown) > MAX_OPS
    if truncated:
        shown = shown.head(MAX_OPS)
        t1 = int(shown["end"].max())
        description += f", cut to its first {MAX_OPS} GPU ops"
    threads = set(syncs["global_tid"]) | set(shown["launch_tid"])
    calls = trace.api.loc[(trace.api["end"] > t0) & (trace.api["start"] < t1) & trace.api["global_tid"].isin(threads)]
    calls = calls.sort_values("start").head(MAX_CALLS)
    in_window = syncs.loc[(syncs["end"] > t0) & (syncs["start"] < t1)]
    shown_threads = sorted(set(calls["global_tid"].tolist()) | set(in_window["global_tid"].tolist()))
    median = _median_step(steps)
    activity = gpu_activity(
        shown["start"].to_numpy(np.int64),
        shown["end"].to_numpy(np.int64),
        shown["device_id"].to_numpy(np.int64),
        (t0, t1),
        (in_window["exposed_start_ns"].to_numpy(np.int64), in_window["rebuild_ns"].to_numpy(np.int64)),
    )
    drawn = len(shown) > 0
    return TimelineExcerpt(
        start_ns=t0,
        end_ns=t1,
        ops=shown[["start", "end", "device_id", "stream_id", "op", "name", "bytes"]].reset_index(drop=True),
        calls=calls[["start", "end", "global_tid", "api"]].astype({"api": str}).reset_index(drop=True),
        syncs=in_window[
            [
                "start",
                "end",
                "global_tid",
                "kind",
                "exposed_start_ns",
                "rebuild_ns",
                "exposed_idle_ns",
                "file",
                "line",
                "function",
            ]
        ].reset_index(drop=True),
        lead=_lead_samples({tid: curves[tid] for tid in set(in_window["global_tid"].tolist())}, t0, t1),
        description=description,
        thread_labels=thread_labels(shown_threads, trace.threads),
        median_step_ns=median,
        exposed=exposed_spans(activity),
        utilisation=gpu_utilisation(activity, t0, t1) if drawn else None,
        step_utilisation=gpu_utilisation(activity, *median) if drawn and median else None,
    )


def _median_step(steps: Steps) -> tuple[int, int] | None:
    """[start, end] of the median-length step."""
    k = steps.median_index()
    if k is None:
        return None
    median = steps.analysed.iloc[k]
    return int(median["start"]), int(median["end"])


def _lead_samples(curves: dict[int, LeadCurve], t0: int, t1: int) -> pd.DataFrame:
    """The lead's sawtooth: its value just before and just after each launch of the syncing threads."""
    parts = []
    for tid, curve in sorted(curves.items()):
        t = curve.launch_end[(curve.launch_end >= t0) & (curve.launch_end <= t1)]
        t = np.unique(np.concatenate([[t0, t1], t]))[:MAX_OPS]
        before = curve.lead_at(t - 1)
        after = curve.lead_at(t)
        times = np.repeat(t, 2)
        leads = np.column_stack([before, after]).ravel()
        parts.append(pd.DataFrame({"t": times, "lead_ns": leads, "global_tid": tid}))
    if not parts:
        return pd.DataFrame(
            {
                "t": pd.Series(dtype=np.int64),
                "lead_ns": pd.Series(dtype=np.int64),
                "global_tid": pd.Series(dtype=np.int64),
            }
        )
    return pd.concat(parts, ignore_index=True)
