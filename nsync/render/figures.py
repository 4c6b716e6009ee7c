"""The report's charts as plotly.js figures (plain data and layout, for ``Plotly.newPlot``): the timeline
excerpt and the per-step chart.

Each figure is built once, as columns: one trace per kind of mark, every shape in one list, so the cost is
linear in what is drawn. Repeated strings (kernel names, hover labels) are written once in the figure's
``labels`` and referred to by index (``html.py``'s loader expands them in the browser). Every string from
the trace is HTML-escaped here, since plotly renders a subset of HTML in hover text and labels.
"""

from __future__ import annotations

import html
from dataclasses import fields
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from nsync.report.analysis import Analysis
    from nsync.report.timeline import Timeline

Figure = dict[str, Any]

OP_COLOURS = {"kernel": "#4c78a8", "memcpy": "#54a24b", "memset": "#b279a2", "graph": "#72b7b2"}
CALL_COLOUR, SYNC_COLOUR, LEAD_COLOUR = "#a39a94", "#d62728", "#222222"
BUSY_COLOUR, EXPOSED_COLOUR = "#1f4e79", "#f58518"
MS = 1e6
LABELLED_WINDOWS = 3  # the longest exposed-idle spans of the slice carry their sync's name on the chart
GRID = "#ebf0f8"


def _ms(values: Any, origin: int = 0) -> list[float]:
    """Nanoseconds as ms from ``origin``, to 10 ns: short numbers in the page."""
    return np.round((np.asarray(values, dtype=np.float64) - origin) / MS, 5).tolist()


class _Labels:
    """The figure's table of strings: each distinct label written once (escaped), marks refer to it by index."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def of(self, labels: pd.Series | list[str]) -> np.ndarray:
        """Each label's index in the table (factorised: the work is per distinct label, not per mark)."""
        series = labels if isinstance(labels, pd.Series) else pd.Series(labels, dtype=object)
        codes, distinct = pd.factorize(series, use_na_sentinel=False)  # arrow strings stay arrow: no per-mark str()
        known = np.array([self.index.setdefault(html.escape(str(s)), len(self.index)) for s in distinct], np.int64)
        return known[codes] if len(codes) else np.array([], np.int64)

    def table(self) -> list[str]:
        return list(self.index)


def _bars(
    lane: np.ndarray,
    start_ns: Any,
    end_ns: Any,
    t0: int,
    name: str,
    colour: str,
    hover: tuple[str, np.ndarray | None, list[Any]],
    width: float,
) -> dict[str, Any]:
    """Intervals as horizontal bars on numbered lanes, one trace per kind of mark. An outline of one pixel in
    the bar's own colour keeps a microsecond visible at a scale of milliseconds. ``hover``: a plotly hover
    template, the label index of each bar (``%{customdata[0]}``) and further columns of numbers."""
    template, label, numbers = hover
    start_ms = _ms(start_ns, t0)
    return {
        "type": "bar",
        "orientation": "h",
        "name": name,
        "y": np.asarray(lane, np.int64).tolist(),
        "base": start_ms,
        "x": (np.asarray(_ms(end_ns, t0)) - np.asarray(start_ms)).round(5).tolist(),
        "width": width,
        "marker": {"color": colour, "line": {"color": colour, "width": 1}},
        "hovertemplate": template + "<extra></extra>",
        **({} if label is None else {"customdata": np.column_stack([label, *numbers]).tolist()}),
    }


def _columns(table: Any) -> pd.DataFrame:
    """A dataclass of columns as a frame (shallow: dataclasses.asdict would deep-copy every value)."""
    return pd.DataFrame({f.name: getattr(table, f.name) for f in fields(table)})


class _Excerpt:
    """The timeline's columns as frames, clipped to its median step (``step_only``) or not."""

    def __init__(self, timeline: Timeline, step_only: bool) -> None:
        window = timeline.median_step_ns if step_only else None
        a, b = window or (timeline.start_ns, timeline.end_ns)
        self.start_ns, self.end_ns = a, b

        def inside(frame: pd.DataFrame, end: str = "end_ns") -> pd.DataFrame:
            return frame.loc[(frame[end] > a) & (frame["start_ns"] < b)].reset_index() if window else frame

        self.ops = inside(_columns(timeline.ops).drop(columns="device"))
        self.calls = inside(_columns(timeline.calls))
        self.syncs = inside(_columns(timeline.syncs), end="rebuild_ns")
        lead = _columns(timeline.lead)
        self.lead = lead.loc[(lead["t_ns"] >= a) & (lead["t_ns"] <= b)] if window else lead
        self.exposed = inside(_columns(timeline.exposed))
        self.utilisation = timeline.step_utilisation if window else timeline.utilisation
        self.sync_where = timeline.syncs.where


def timeline_figure(timeline: Timeline | None, step_only: bool = False, x_max_ms: float | None = None) -> Figure | None:
    """Three panels on one time axis: how busy the GPU was and how much of it idled after a sync (named), a
    lane per GPU stream and host thread with its kernels, copies, CUDA calls and syncs, and the host's lead.
    ``step_only`` clips it to the median step (time then counts from the step's start, up to ``x_max_ms`` so
    that two runs share a scale)."""
    if timeline is None:
        return None
    excerpt = _Excerpt(timeline, step_only)
    if excerpt.ops.empty and excerpt.calls.empty:
        return None
    t0 = excerpt.start_ns
    labels = _Labels()
    lanes: list[str] = []

    def lane_of(names: pd.Series) -> np.ndarray:
        """Each mark's lane number, lanes numbered in the order they first appear."""
        lanes.extend(name for name in pd.unique(names) if name not in lanes)
        return names.map({name: i for i, name in enumerate(lanes)}).to_numpy(np.int64)

    data = _utilisation(excerpt, t0, labels)
    data += _gpu_lanes(excerpt, t0, labels, lane_of)
    data += _host_lanes(excerpt, t0, labels, lane_of)
    data += _lead(excerpt, t0)
    panels = _panels(bool(excerpt.utilisation), len(lanes), bool(len(excerpt.lead)))
    marks = {"shapes": _step_bounds(timeline, t0), "annotations": _named_windows(excerpt, t0)}
    layout = _layout(panels, lanes, t0, x_max_ms, marks)
    return {"data": data, "layout": layout, "labels": labels.table()}


def _layout(
    panels: dict[str, Any], lanes: list[str], t0: int, x_max_ms: float | None, marks: dict[str, Any]
) -> dict[str, Any]:
    """The panels' axes, one above the other over one time axis counted from ``t0``, with ``marks`` (shapes and
    annotations)."""
    x_axis: dict[str, Any] = {
        "title": {"text": f"ms from {t0 / MS:.3f} ms into the trace"},
        "gridcolor": GRID,
        "anchor": panels["bottom"],  # the time axis under the last panel
        "automargin": True,
    }
    if x_max_ms is not None:
        x_axis["range"] = [0, x_max_ms]
    layout: dict[str, Any] = {
        "barmode": "overlay",
        "height": panels["height"],
        "margin": {"l": 10, "r": 10, "t": 30, "b": 40},
        "legend": {"orientation": "h", "y": 1.0, "yanchor": "bottom", "traceorder": "normal"},
        "hovermode": "closest",
        "plot_bgcolor": "white",
        "xaxis": x_axis,
        "yaxis": {
            "tickmode": "array",
            "tickvals": list(range(len(lanes))),
            "ticktext": [html.escape(name) for name in lanes],
            "range": [len(lanes) - 0.5, -0.5],  # the first lane on top
            "showgrid": False,
            "domain": panels["lanes"],
            "fixedrange": True,
            "automargin": True,
        },
        **marks,
    }
    fixed = {"gridcolor": GRID, "fixedrange": True, "automargin": True}
    if "gpu" in panels:
        layout["yaxis3"] = {
            "domain": panels["gpu"],
            "title": {"text": "GPU %"},
            "range": [0, 100],
            "tickvals": [0, 50, 100],
        }
        layout["yaxis3"] |= fixed
    if "lead" in panels:
        layout["yaxis2"] = {"domain": panels["lead"], "title": {"text": "host lead (ms)"}, "rangemode": "tozero"}
        layout["yaxis2"] |= fixed
    return layout


GPU_PANEL_PX, LANE_PX, LEAD_PANEL_PX, GAP_PX = 90, 30, 80, 30


def _panels(gpu: bool, lanes: int, lead: bool) -> dict[str, Any]:
    """The panels' vertical domains (fractions of the plot), from their heights in pixels."""
    heights = [
        ("gpu", GPU_PANEL_PX if gpu else 0),
        ("lanes", LANE_PX * max(lanes, 1) + 20),
        ("lead", LEAD_PANEL_PX if lead else 0),
    ]
    shown = [(name, px) for name, px in heights if px]
    total = sum(px for _, px in shown) + GAP_PX * (len(shown) - 1)
    panels: dict[str, Any] = {"height": total + 110, "bottom": {"gpu": "y3", "lanes": "y", "lead": "y2"}[shown[-1][0]]}
    top = 1.0
    for name, px in shown:
        panels[name] = [max(top - px / total, 0.0), top]
        top -= (px + GAP_PX) / total
    return panels


def _utilisation(excerpt: _Excerpt, t0: int, labels: _Labels) -> list[dict[str, Any]]:
    """The GPU panel: its busy share and, stacked on it, its share idle after a sync, bin by bin."""
    use = excerpt.utilisation
    if use is None:
        return []
    x = _ms(use.edges_ns, t0)
    where = pd.Series(["", *excerpt.sync_where], dtype=object)
    named = labels.of(where.iloc[np.asarray(use.sync, np.int64) + 1])  # -1: no sync, the empty label
    share = {"busy": np.asarray(use.busy) * 100, "exposed": np.asarray(use.exposed) * 100}

    def area(name: str, values: np.ndarray, colour: str, template: str) -> dict[str, Any]:
        """A stacked step area, its last value held to the last edge."""
        return {
            "type": "scatter",
            "mode": "lines",
            "yaxis": "y3",
            "stackgroup": "gpu",
            "name": name,
            "x": x,
            "y": np.append(values, values[-1:]).round(2).tolist(),
            "fillcolor": colour,
            "line": {"shape": "hv", "width": 0, "color": colour},
            "hovertemplate": template + "<extra></extra>",
        }

    exposed = area(
        "GPU idle after a sync",
        share["exposed"],
        EXPOSED_COLOUR,
        "GPU idle after the sync at %{customdata[0]}: %{y:.0f} %",
    )
    exposed["customdata"] = np.append(named, named[-1:]).reshape(-1, 1).tolist()
    return [area("GPU busy", share["busy"], BUSY_COLOUR, "GPU busy %{y:.0f} %"), exposed]


def _lead(excerpt: _Excerpt, t0: int) -> list[dict[str, Any]]:
    return [
        {
            "type": "scatter",
            "mode": "lines",
            "x": _ms(points["t_ns"], t0),
            "y": _ms(points["lead_ns"]),
            "yaxis": "y2",
            "name": f"lead, host {html.escape(str(thread))}",
            "line": {"color": LEAD_COLOUR, "width": 1},
            "hovertemplate": "lead %{y:.3f} ms<extra></extra>",
        }
        for thread, points in excerpt.lead.groupby("thread", sort=False)
    ]


def _gpu_lanes(excerpt: _Excerpt, t0: int, labels: _Labels, lane_of: Any) -> list[dict[str, Any]]:
    ops = excerpt.ops
    if ops.empty:
        return []
    lane = lane_of(ops["lane"])
    traces = []
    present = set(ops["op"].unique())
    for op in [op for op in OP_COLOURS if op in present]:  # in the loader's order of kinds
        chosen = (ops["op"] == op).to_numpy()
        group = ops.loc[chosen]
        hover = ("%{customdata[0]}<br>%{customdata[1]:.1f} µs", labels.of(group["name"]), [_us(group)])
        traces.append(_bars(lane[chosen], group["start_ns"], group["end_ns"], t0, op, OP_COLOURS[op], hover, 0.6))
    return traces


def _us(frame: pd.DataFrame) -> np.ndarray:
    return ((frame["end_ns"] - frame["start_ns"]) / 1e3).to_numpy().round(1)


def _host_lanes(excerpt: _Excerpt, t0: int, labels: _Labels, lane_of: Any) -> list[dict[str, Any]]:
    calls, syncs = excerpt.calls, excerpt.syncs
    traces = []
    if len(calls):
        lane = lane_of("host " + calls["thread"].astype(str))
        hover = ("%{customdata[0]}<br>%{customdata[1]:.1f} µs", labels.of(calls["api"]), [_us(calls)])
        traces.append(_bars(lane, calls["start_ns"], calls["end_ns"], t0, "CUDA API call", CALL_COLOUR, hover, 0.45))
    if len(syncs):
        lane = lane_of("host " + syncs["thread"].astype(str))
        site = "sync (" + syncs["kind"].astype(str) + ") at " + syncs["where"].astype(str) + " " + syncs["function"]
        hover = (
            "%{customdata[0]}<br>wait %{customdata[1]:.3f} ms, exposed idle %{customdata[2]:.3f} ms",
            labels.of(site),
            [_us(syncs) / 1e3, (syncs["exposed_idle_ns"] / MS).to_numpy().round(4)],
        )
        traces.append(_bars(lane, syncs["start_ns"], syncs["end_ns"], t0, "sync (host waits)", SYNC_COLOUR, hover, 0.7))
    return traces


def _step_bounds(timeline: Timeline, t0: int) -> list[dict[str, Any]]:
    """Dashed lines at the median step's start and end, over every lane."""
    if not timeline.median_step_ns:
        return []
    line = {"color": "#888", "width": 1, "dash": "dot"}
    return [
        {"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1, "line": line}
        for x in _ms(timeline.median_step_ns, t0)
    ]


def _named_windows(excerpt: _Excerpt, t0: int) -> list[dict[str, Any]]:
    """The longest spans of GPU idle after a sync, labelled with the sync's line in the GPU panel."""
    exposed = excerpt.exposed
    if exposed.empty or excerpt.utilisation is None:
        return []
    longest = exposed.assign(length=exposed["end_ns"] - exposed["start_ns"]).nlargest(LABELLED_WINDOWS, "length")
    middle_ms = _ms((longest["start_ns"] + longest["end_ns"]) // 2, t0)
    return [
        {
            "x": x,
            "y": 100,
            "yref": "y3",
            "yanchor": "top",
            "text": html.escape(str(excerpt.sync_where[sync])),
            "showarrow": False,
            "font": {"size": 11, "color": "#8a3d00"},
            "bgcolor": "rgba(255,255,255,0.85)",
        }
        for x, sync in zip(middle_ms, longest["sync"])
    ]


def steps_figure(report: Analysis) -> Figure | None:
    per_step = report.per_step
    if per_step is None:
        return None
    number = list(per_step.number)
    host = "step on the host" + (" (NVTX range)" if report.steps.source.startswith("nvtx") else "")
    data: list[dict[str, Any]] = [
        {"type": "bar", "x": number, "y": _ms(per_step.host_ns), "name": host, "marker": {"color": "#9ecae9"}}
    ]
    lines = (  # (values, name, mode, line style)
        (per_step.gpu_ns, "step on the GPU", "lines", {"color": "#222222", "width": 1.5}),
        (per_step.gpu_idle_ns, "GPU idle", "lines+markers", {"color": "#4c78a8"}),
        (per_step.exposed_idle_ns, "exposed idle after syncs", "lines+markers", {"color": EXPOSED_COLOUR}),
    )
    for values, name, mode, line in lines:
        y = [None if v is None else round(v / MS, 5) for v in values]
        data.append({"type": "scatter", "x": number, "y": y, "name": name, "mode": mode, "line": line})
    layout = {
        "height": 300,
        "plot_bgcolor": "white",
        "margin": {"l": 10, "r": 10, "t": 30, "b": 40},
        "xaxis": {"title": {"text": "step"}, "gridcolor": GRID, "automargin": True},
        "yaxis": {"title": {"text": "ms"}, "gridcolor": GRID, "rangemode": "tozero", "automargin": True},
        "legend": {"orientation": "h", "y": 1.12},
    }
    return {"data": data, "layout": layout, "labels": []}
