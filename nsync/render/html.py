"""The self-contained HTML report: Jinja2 (autoescaped) around plotly figures, plotly's JS inlined once."""

from __future__ import annotations

import datetime as dt
import importlib.resources
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
import plotly.io as pio
import plotly.offline

from nsync import __version__
from nsync.errors import NsyncError
from nsync.render.figures import median_step_window, steps_figure, timeline_figure
from nsync.render.json import analysis_to_dict, fixed
from nsync.render.terminal import issued_at, where

if TYPE_CHECKING:
    if sys.version_info >= (3, 11):
        from importlib.resources.abc import Traversable
    else:
        from importlib.abc import Traversable

    from nsync.analysis import Analysis
    from nsync.diff import Diff

SOURCE_RADIUS = 2
MAX_SOURCE_BYTES = 5_000_000


def _template_source(name: str) -> tuple[str, None, Callable[[], bool]]:
    """A template from the package ``nsync.templates``, read through ``importlib.resources`` so that a
    wheel, a zip or an editable install all work; a source tree that was not installed has them in its
    top-level ``templates/``."""
    try:
        folder: Traversable = importlib.resources.files("nsync.templates")
    except ModuleNotFoundError:
        folder = Path(__file__).resolve().parents[2] / "templates"
    try:
        text = folder.joinpath(name).read_text(encoding="utf-8")
    except OSError as error:
        raise NsyncError(f"this nsync install lacks its report template {name} ({error}): reinstall nsync") from error
    return text, None, lambda: True


def environment() -> jinja2.Environment:
    # autoescape=True for every template: select_autoescape would skip '.html.j2' names
    return jinja2.Environment(
        loader=jinja2.FunctionLoader(_template_source), autoescape=True, undefined=jinja2.StrictUndefined
    )


def source_context(file: str, line: int, search: list[Path]) -> list[dict[str, Any]]:
    """Lines around ``file:line`` when that Python file is readable here (else empty).

    Only ``.py`` files are read: a trace names the paths, and a report must not quote other local files.
    """
    if line <= 0 or not file.endswith(".py"):
        return []
    name = Path(file).name
    for path in [Path(file), *(folder / name for folder in search)]:
        try:
            if path.is_file() and path.stat().st_size <= MAX_SOURCE_BYTES:
                lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
                break
        except OSError:
            continue
    else:
        return []
    first = max(1, line - SOURCE_RADIUS)
    return [
        {"number": n, "text": lines[n - 1], "hit": n == line}
        for n in range(first, min(len(lines), line + SOURCE_RADIUS) + 1)
    ]


def _figure_html(fig: Any, div_id: str) -> str:
    if fig is None:
        return ""
    return pio.to_html(
        fig, include_plotlyjs=False, full_html=False, div_id=div_id, config={"displaylogo": False, "responsive": True}
    )


def render_html(analysis: Analysis, top: int = 50, source_dirs: list[Path] | None = None) -> str:
    data = analysis_to_dict(analysis, top)
    search = [Path(analysis.trace_path).resolve().parent, Path.cwd(), *(source_dirs or [])]
    steps, totals = data["steps"], data["totals"]
    per_step = steps["count"] or 0
    what_if = data["what_if"]
    for site in data["callsites"]:
        site["source"] = source_context(site["file"], site["line"], search)
        site["where"] = where(site)
        site["issued_at"] = issued_at(site)
        site["saving_text"] = fixed(site["predicted_saving_ms_per_step"])
        site["fixed_step_text"] = (
            fixed(what_if["unprofiled_step_ms"] - site["predicted_saving_ms_per_step"])
            if what_if and None not in (what_if["unprofiled_step_ms"], site["predicted_saving_ms_per_step"])
            else "-"
        )
        site["exposed_text"] = fixed(site["exposed_idle_ms_per_step" if per_step else "exposed_idle_ms"])
        site["wait_text"] = fixed(site["host_wait_ms_per_step" if per_step else "host_wait_ms"])
        site["lead_text"] = fixed(site["lead_before_ms_mean"])
        site["syncs_per_step_text"] = fixed(site["syncs_per_step"], 2)
    headline = {
        "step_ms": steps["median_ms"],
        "gpu_step_ms": steps["gpu_median_ms"],
        "gpu_busy_pct": None if totals["gpu_idle_pct"] is None else 100 - totals["gpu_idle_pct"],
        "gpu_idle_ms_per_step": totals["gpu_idle_ms"] / per_step if per_step else None,
        "exposed_ms_per_step": totals["exposed_idle_ms"] / per_step if per_step else None,
        # red only when it matters: the verdict says a fix pays (without a verdict: idle that shows at 3 decimals)
        "exposed_hot": data["verdict"]["worth_fixing"] if data["verdict"] else totals["exposed_idle_ms"] >= 0.0005,
        "exposed_pct": 100 * totals["exposed_idle_ms"] / (totals["span_ms"] * totals["gpu_count"])
        if totals["span_ms"] and totals["gpu_count"]
        else None,
    }
    phases = [
        {
            **phase,
            "duration_text": fixed(phase["duration_ms"], 1),
            "idle_text": f"{fixed(phase['gpu_idle_pct'], 0)} %",
            "wait_text": fixed(phase["host_wait_ms"]),
        }
        for phase in data["phases"]
    ]
    outside = [
        {**site, "where": where(site), "issued_at": issued_at(site), "wait_text": fixed(site["host_wait_ms"])}
        for site in data["outside_main_loop"]
    ]
    timeline = analysis.timeline
    return (
        environment()
        .get_template("report.html.j2")
        .render(
            data=data,
            headline=headline,
            title=Path(analysis.trace_path).name,
            plotly_js=plotly.offline.get_plotlyjs(),
            timeline_html=_figure_html(timeline_figure(analysis), "timeline"),
            timeline_note=timeline.description if timeline else "",
            steps_html=_figure_html(steps_figure(analysis), "steps"),
            callsite_total=len(analysis.callsites),
            library_frames=any(site["issued_at"] for site in data["callsites"]),
            phases=phases,
            outside=outside if per_step else [],
            outside_library_frames=any(site["issued_at"] for site in outside),
            all_fixed_saving_text=fixed(what_if["unprofiled_step_ms"] - what_if["predicted_step_ms_without_syncs"])
            if what_if and None not in (what_if["unprofiled_step_ms"], what_if["predicted_step_ms_without_syncs"])
            else "-",
            generated=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            version=__version__,
        )
    )


def render_diff_html(result: Diff) -> str:
    """Headline deltas, the call-site delta table, and one representative step of each run, one above the
    other on the same time scale."""
    from nsync.render.diff import diff_to_dict, headline

    windows = [median_step_window(a) for a in (result.baseline, result.candidate)]
    lengths = [(w[1] - w[0]) / 1e6 for w in windows if w is not None]
    x_max = max(lengths) if lengths else None
    data = diff_to_dict(result)
    for site in data["callsites"]:
        site["where"] = where(site)
    figures = [
        _figure_html(timeline_figure(a, w, x_max) if w else None, f"timeline-{side}")
        for a, w, side in zip((result.baseline, result.candidate), windows, ("baseline", "candidate"))
    ]
    return (
        environment()
        .get_template("diff.html.j2")
        .render(
            data=data,
            headline=headline(result),
            plotly_js=plotly.offline.get_plotlyjs(),
            baseline_timeline=figures[0],
            candidate_timeline=figures[1],
            version=__version__,
            generated=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            names=[Path(result.baseline.trace_path).name, Path(result.candidate.trace_path).name],
        )
    )
