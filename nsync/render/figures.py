"""Plotly figures of an analysis: the timeline excerpt and the per-step chart.

Every string from the trace is HTML-escaped before plotly sees it (plotly renders a subset of HTML in
hover text and labels); plotly itself JSON-escapes ``<``, ``>`` and ``/`` when it embeds the data.
"""

from __future__ import annotations

import html
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

if TYPE_CHECKING:
    from nsync.analysis import Analysis
    from nsync.excerpt import TimelineExcerpt

OP_COLOURS = {"kernel": "#4c78a8", "memcpy": "#54a24b", "memset": "#b279a2", "graph": "#72b7b2"}
CALL_COLOUR, SYNC_COLOUR, EXPOSED_COLOUR, LEAD_COLOUR = "#bab0ac", "#e45756", "#f58518", "#222222"
MS = 1e6


def _esc(values: pd.Series | list[object]) -> list[str]:
    return [html.escape(str(v)) for v in values]


def _thread_label(tid: int, names: dict[int, str]) -> str:
    name = names.get(tid)
    return f"host {html.escape(name)} ({tid & 0xFFFFFF})" if name else f"host thread {tid & 0xFFFFFF}"


def _lane_bars(
    fig: go.Figure,
    lanes: list[str] | pd.Series,
    starts: pd.Series,
    ends: pd.Series,
    t0: int,
    name: str,
    marker: dict[str, object],
    hover: list[str],
    width: float,
) -> None:
    """Intervals as horizontal bars on categorical lanes (one trace per kind: fast for thousands)."""
    fig.add_trace(
        go.Bar(
            y=lanes,
            base=(starts - t0) / MS,
            x=(ends - starts) / MS,
            orientation="h",
            name=name,
            marker=marker,
            hovertext=hover,
            hoverinfo="text",
            width=width,
        ),
        row=1,
        col=1,
    )


def median_step_window(analysis: Analysis) -> tuple[int, int] | None:
    """The analysed step whose length is closest to the median (it is always inside the excerpt)."""
    k = analysis.steps.median_index()
    if k is None:
        return None
    step = analysis.steps.analysed.iloc[k]
    return int(step["start"]), int(step["end"])


def _clip(excerpt: TimelineExcerpt, window: tuple[int, int]) -> TimelineExcerpt:
    a, b = window

    def inside(frame: pd.DataFrame, start: str = "start", end: str = "end") -> pd.DataFrame:
        return frame.loc[(frame[end] > a) & (frame[start] < b)]

    lead = excerpt.lead.loc[(excerpt.lead["t"] >= a) & (excerpt.lead["t"] <= b)]
    return replace(
        excerpt,
        start_ns=a,
        end_ns=b,
        ops=inside(excerpt.ops),
        calls=inside(excerpt.calls),
        syncs=inside(excerpt.syncs, end="rebuild_ns"),
        lead=lead,
    )


def timeline_figure(
    analysis: Analysis, window: tuple[int, int] | None = None, x_max_ms: float | None = None
) -> go.Figure | None:
    """Lanes of GPU streams and host threads, syncs, exposed idle and the lead; ``window`` clips it
    (time then counts from the window's start, up to ``x_max_ms`` so that two runs share a scale)."""
    excerpt = analysis.timeline
    if excerpt is not None and window is not None:
        excerpt = _clip(excerpt, window)
    if excerpt is None or (excerpt.ops.empty and excerpt.calls.empty):
        return None
    t0 = excerpt.start_ns
    # the lead panel only where a syncing thread has a lead to show; the time axis under the last panel
    panels = 2 if len(excerpt.lead) else 1
    heights = [0.78, 0.22] if panels == 2 else [1.0]
    fig = make_subplots(rows=panels, cols=1, shared_xaxes=True, row_heights=heights, vertical_spacing=0.04)
    lanes = _gpu_lanes(fig, excerpt, t0)
    lanes += _host_lanes(fig, excerpt, t0, analysis.thread_names)
    _exposed_windows(fig, excerpt, t0)
    for tid, points in excerpt.lead.groupby("global_tid"):
        fig.add_trace(
            go.Scatter(
                x=(points["t"] - t0) / MS,
                y=points["lead_ns"] / MS,
                mode="lines",
                line={"color": LEAD_COLOUR, "width": 1},
                name=f"lead, {_thread_label(tid, analysis.thread_names)}",
                hovertemplate="lead %{y:.3f} ms<extra></extra>",
            ),
            row=2,
            col=1,
        )
    fig.update_yaxes(categoryorder="array", categoryarray=list(reversed(lanes)), row=1, col=1)
    if panels == 2:
        fig.update_yaxes(title_text="host lead (ms)", rangemode="tozero", row=2, col=1)
    fig.update_xaxes(title_text=f"ms from {t0 / MS:.3f} ms into the trace", row=panels, col=1)
    if x_max_ms is not None:
        fig.update_xaxes(range=[0, x_max_ms])
    fig.update_layout(
        barmode="overlay",
        height=(260 if panels == 2 else 200) + 34 * len(lanes),
        margin={"l": 10, "r": 10, "t": 30, "b": 40},
        legend={"orientation": "h", "y": 1.06},
        hovermode="closest",
        template="plotly_white",
    )
    return fig


def _gpu_lanes(fig: go.Figure, excerpt: TimelineExcerpt, t0: int) -> list[str]:
    ops = excerpt.ops.assign(
        lane=[f"GPU {d} · stream {s}" for d, s in zip(excerpt.ops["device_id"], excerpt.ops["stream_id"])]
    )
    for op, group in ops.groupby("op", observed=True):
        names = group["name"].astype(object).where(group["name"].notna(), group["op"].astype(str))
        hover = [f"{n}<br>{(e - s) / 1e3:.1f} µs" for n, s, e in zip(_esc(names), group["start"], group["end"])]
        _lane_bars(
            fig,
            group["lane"],
            group["start"],
            group["end"],
            t0,
            str(op),
            {"color": OP_COLOURS.get(str(op), "#888")},
            hover,
            0.7,
        )
    return sorted(set(ops["lane"]))


def _host_lanes(fig: go.Figure, excerpt: TimelineExcerpt, t0: int, names: dict[int, str]) -> list[str]:
    calls = excerpt.calls.assign(lane=[_thread_label(t, names) for t in excerpt.calls["global_tid"]])
    hover = [f"{a}<br>{(e - s) / 1e3:.1f} µs" for a, s, e in zip(_esc(calls["api"]), calls["start"], calls["end"])]
    _lane_bars(
        fig, calls["lane"], calls["start"], calls["end"], t0, "CUDA API call", {"color": CALL_COLOUR}, hover, 0.5
    )
    syncs = excerpt.syncs
    if len(syncs):
        lanes = [_thread_label(t, names) for t in syncs["global_tid"]]
        hover = [
            f"sync ({html.escape(str(k))}) at {html.escape(str(f).rsplit('/', 1)[-1])}:{ln} "
            f"{html.escape(str(fn))}<br>wait {(e - s) / MS:.3f} ms, exposed idle {x / MS:.3f} ms"
            for k, f, ln, fn, s, e, x in zip(
                syncs["kind"],
                syncs["file"],
                syncs["line"],
                syncs["function"],
                syncs["start"],
                syncs["end"],
                syncs["exposed_idle_ns"],
            )
        ]
        _lane_bars(
            fig, lanes, syncs["start"], syncs["end"], t0, "sync (host waits)", {"color": SYNC_COLOUR}, hover, 0.7
        )
    return sorted(set(calls["lane"]))


def _exposed_windows(fig: go.Figure, excerpt: TimelineExcerpt, t0: int) -> None:
    """Shade each sync's exposed-idle window across the GPU lanes, on its own lane too for hovering."""
    syncs = excerpt.syncs.loc[excerpt.syncs["exposed_idle_ns"] > 0]
    if syncs.empty:
        return
    start = np.maximum(
        syncs["start"], np.minimum(syncs["drain_ns"].where(syncs["drain_ns"] >= 0, syncs["start"]), syncs["end"])
    )
    for a, b in zip(start.head(300), syncs["rebuild_ns"].head(300)):
        fig.add_vrect(
            x0=(a - t0) / MS, x1=(b - t0) / MS, fillcolor=EXPOSED_COLOUR, opacity=0.12, line_width=0, row=1, col=1
        )
    hover = [
        f"exposed idle {x / MS:.3f} ms after {html.escape(str(f).rsplit('/', 1)[-1])}:{ln}"
        for x, f, ln in zip(syncs["exposed_idle_ns"], syncs["file"], syncs["line"])
    ]
    _lane_bars(
        fig,
        ["GPU idle after syncs"] * len(syncs),
        start,
        syncs["rebuild_ns"],
        t0,
        "exposed idle window",
        {"color": EXPOSED_COLOUR, "opacity": 0.6},
        hover,
        0.5,
    )


def steps_figure(analysis: Analysis) -> go.Figure | None:
    stats = analysis.step_stats
    if stats.empty:
        return None
    number = np.arange(len(stats)) + analysis.steps.warmup + 1
    fig = go.Figure()
    host = "step on the host" + (" (NVTX range)" if analysis.steps.source.startswith("nvtx") else "")
    fig.add_trace(go.Bar(x=number, y=stats["duration_ns"] / MS, name=host, marker={"color": "#9ecae9"}))
    lines = (  # (column, name, mode, line style)
        ("gpu_duration_ns", "step on the GPU", "lines", {"color": "#222222", "width": 1.5}),
        ("gpu_idle_ns", "GPU idle", "lines+markers", {"color": "#4c78a8"}),
        ("exposed_idle_ns", "exposed idle after syncs", "lines+markers", {"color": EXPOSED_COLOUR}),
    )
    for column, name, mode, line in lines:
        fig.add_trace(go.Scatter(x=number, y=stats[column] / MS, name=name, mode=mode, line=line))
    fig.update_layout(
        height=300,
        template="plotly_white",
        margin={"l": 10, "r": 10, "t": 30, "b": 40},
        xaxis_title="step",
        yaxis_title="ms",
        legend={"orientation": "h", "y": 1.12},
    )
    return fig
