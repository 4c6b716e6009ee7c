"""Plotly figures of an analysis: the timeline excerpt and the per-step chart.

Every string from the trace is HTML-escaped before plotly sees it (plotly renders a subset of HTML in
hover text and labels); plotly itself JSON-escapes ``<``, ``>`` and ``/`` when it embeds the data.
"""

from __future__ import annotations

import html
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

if TYPE_CHECKING:
    from nsync.render.model import Report, Timeline

OP_COLOURS = {"kernel": "#4c78a8", "memcpy": "#54a24b", "memset": "#b279a2", "graph": "#72b7b2"}
CALL_COLOUR, SYNC_COLOUR, EXPOSED_COLOUR, LEAD_COLOUR = "#bab0ac", "#e45756", "#f58518", "#222222"
MS = 1e6


def _esc(values: pd.Series | list[object]) -> list[str]:
    return [html.escape(str(v)) for v in values]


def _host_lane(thread: str) -> str:
    return f"host {html.escape(thread)}"


def _lane_bars(
    fig: go.Figure,
    lanes: list[str] | pd.Series,
    starts: pd.Series,
    durations: pd.Series,
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
            x=durations / MS,
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


class _Excerpt:
    """The timeline's columns as frames, clipped to a window."""

    def __init__(self, timeline: Timeline, window: list[int] | None) -> None:
        a, b = window or (timeline.start_ns, timeline.end_ns)
        self.start_ns = a

        def inside(columns: Any, end: str = "end_ns", **derived: list[int]) -> pd.DataFrame:
            frame = pd.DataFrame({**asdict(columns), "duration_ns": columns.duration_ns, **derived})
            return frame.loc[(frame[end] > a) & (frame["start_ns"] < b)] if window else frame

        self.ops = inside(timeline.ops)
        self.calls = inside(timeline.calls)
        syncs = timeline.syncs
        self.syncs = inside(syncs, end="rebuild_ns", exposed_window_ns=syncs.exposed_window_ns)
        lead = pd.DataFrame(asdict(timeline.lead))
        self.lead = lead.loc[(lead["t_ns"] >= a) & (lead["t_ns"] <= b)] if window else lead


def timeline_figure(
    timeline: Timeline | None, window: list[int] | None = None, x_max_ms: float | None = None
) -> go.Figure | None:
    """Lanes of GPU streams and host threads, syncs, exposed idle and the lead; ``window`` ([start, end]) clips
    it (time then counts from the window's start, up to ``x_max_ms`` so that two runs share a scale)."""
    if timeline is None:
        return None
    excerpt = _Excerpt(timeline, window)
    if excerpt.ops.empty and excerpt.calls.empty:
        return None
    t0 = excerpt.start_ns
    # the lead panel only where a syncing thread has a lead to show; the time axis under the last panel
    panels = 2 if len(excerpt.lead) else 1
    heights = [0.78, 0.22] if panels == 2 else [1.0]
    fig = make_subplots(rows=panels, cols=1, shared_xaxes=True, row_heights=heights, vertical_spacing=0.04)
    lanes = _gpu_lanes(fig, excerpt, t0)
    lanes += _host_lanes(fig, excerpt, t0)
    _exposed_windows(fig, excerpt, t0)
    for thread, points in excerpt.lead.groupby("thread", sort=False):
        fig.add_trace(
            go.Scatter(
                x=(points["t_ns"] - t0) / MS,
                y=points["lead_ns"] / MS,
                mode="lines",
                line={"color": LEAD_COLOUR, "width": 1},
                name=f"lead, {_host_lane(str(thread))}",
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


def _gpu_lanes(fig: go.Figure, excerpt: _Excerpt, t0: int) -> list[str]:
    ops = excerpt.ops
    for op in [op for op in OP_COLOURS if op in set(ops["op"])]:  # in the loader's order of kinds
        group = ops.loc[ops["op"] == op]
        hover = [f"{n}<br>{length / 1e3:.1f} µs" for n, length in zip(_esc(group["name"]), group["duration_ns"])]
        _lane_bars(
            fig,
            group["lane"],
            group["start_ns"],
            group["duration_ns"],
            t0,
            str(op),
            {"color": OP_COLOURS.get(str(op), "#888")},
            hover,
            0.7,
        )
    return sorted(set(ops["lane"]))


def _host_lanes(fig: go.Figure, excerpt: _Excerpt, t0: int) -> list[str]:
    calls = excerpt.calls.assign(lane=[_host_lane(t) for t in excerpt.calls["thread"]])
    hover = [f"{a}<br>{length / 1e3:.1f} µs" for a, length in zip(_esc(calls["api"]), calls["duration_ns"])]
    _lane_bars(
        fig,
        calls["lane"],
        calls["start_ns"],
        calls["duration_ns"],
        t0,
        "CUDA API call",
        {"color": CALL_COLOUR},
        hover,
        0.5,
    )
    syncs = excerpt.syncs
    if len(syncs):
        lanes = [_host_lane(t) for t in syncs["thread"]]
        hover = [
            f"sync ({html.escape(str(k))}) at {html.escape(w)} "
            f"{html.escape(str(fn))}<br>wait {wait / MS:.3f} ms, exposed idle {x / MS:.3f} ms"
            for k, w, fn, wait, x in zip(
                syncs["kind"], syncs["where"], syncs["function"], syncs["duration_ns"], syncs["exposed_idle_ns"]
            )
        ]
        _lane_bars(
            fig,
            lanes,
            syncs["start_ns"],
            syncs["duration_ns"],
            t0,
            "sync (host waits)",
            {"color": SYNC_COLOUR},
            hover,
            0.7,
        )
    return sorted(set(calls["lane"]))


def _exposed_windows(fig: go.Figure, excerpt: _Excerpt, t0: int) -> None:
    """Shade each sync's exposed-idle window across the GPU lanes, on its own lane too for hovering."""
    syncs = excerpt.syncs.loc[excerpt.syncs["exposed_idle_ns"] > 0]
    if syncs.empty:
        return
    for a, b in zip(syncs["exposed_start_ns"].head(300), syncs["rebuild_ns"].head(300)):
        fig.add_vrect(
            x0=(a - t0) / MS, x1=(b - t0) / MS, fillcolor=EXPOSED_COLOUR, opacity=0.12, line_width=0, row=1, col=1
        )
    hover = [
        f"exposed idle {x / MS:.3f} ms after {html.escape(w)}" for x, w in zip(syncs["exposed_idle_ns"], syncs["where"])
    ]
    _lane_bars(
        fig,
        ["GPU idle after syncs"] * len(syncs),
        syncs["exposed_start_ns"],
        syncs["exposed_window_ns"],
        t0,
        "exposed idle window",
        {"color": EXPOSED_COLOUR, "opacity": 0.6},
        hover,
        0.5,
    )


def steps_figure(report: Report) -> go.Figure | None:
    per_step = report.per_step
    if per_step is None:
        return None
    number = np.asarray(per_step.number)
    fig = go.Figure()
    host = "step on the host" + (" (NVTX range)" if report.steps.source.startswith("nvtx") else "")
    fig.add_trace(go.Bar(x=number, y=np.asarray(per_step.host_ns) / MS, name=host, marker={"color": "#9ecae9"}))
    lines = (  # (values, name, mode, line style)
        (per_step.gpu_ns, "step on the GPU", "lines", {"color": "#222222", "width": 1.5}),
        (per_step.gpu_idle_ns, "GPU idle", "lines+markers", {"color": "#4c78a8"}),
        (per_step.exposed_idle_ns, "exposed idle after syncs", "lines+markers", {"color": EXPOSED_COLOUR}),
    )
    for values, name, mode, line in lines:
        y = np.array([np.nan if v is None else v for v in values], float) / MS
        fig.add_trace(go.Scatter(x=number, y=y, name=name, mode=mode, line=line))
    fig.update_layout(
        height=300,
        template="plotly_white",
        margin={"l": 10, "r": 10, "t": 30, "b": 40},
        xaxis_title="step",
        yaxis_title="ms",
        legend={"orientation": "h", "y": 1.12},
    )
    return fig
