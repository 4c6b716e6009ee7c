"""The self-contained HTML report: Jinja2 (autoescaped) around plotly.js charts.

plotly.js (its basic bundle, vendored in ``nsync/render/vendor``) and the figures' data travel inside the
page, gzipped and in base64, and are unpacked by the browser (``templates/charts.js.j2``): the page works
offline, weighs well under 1.5 MB, and no string of the trace is ever part of its markup or scripts as such.
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import gzip
import importlib.resources
import json
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2

from nsync.code import search_folders
from nsync.errors import NsyncError
from nsync.render.figures import Figure, steps_figure, timeline_figure
from nsync.render.options import RenderOptions, refuse
from nsync.render.source import source_context, source_line
from nsync.render.text import diff_headline, edits_said, fixed, likely
from nsync.report import Analysis, Diff, Measurement, Ranks, Result
from nsync.report.analysis import CallSite
from nsync.version import installed_version

if TYPE_CHECKING:
    if sys.version_info >= (3, 11):
        from importlib.resources.abc import Traversable
    else:
        from importlib.abc import Traversable

PLOTLY_VERSION = "4.1.1"  # the vendored bundle's (nsync/render/vendor/README.md)


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


@functools.cache
def environment() -> jinja2.Environment:
    # autoescape=True for every template: select_autoescape would skip '.html.j2' names
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(_template_source), autoescape=True, undefined=jinja2.StrictUndefined
    )
    env.filters["fixed"] = fixed  # the one number formatter, as in the other renderers
    env.globals["likely"] = likely  # a saving's likely range, as in the other renderers
    env.filters["dedent"] = textwrap.dedent  # a rewrite is shown as code at its own indentation
    env.filters["edits_said"] = edits_said
    return env


@functools.cache
def plotly_js() -> bytes:
    """The vendored plotly.js basic bundle, gzipped."""
    try:
        return importlib.resources.files("nsync.render").joinpath("vendor/plotly-basic.min.js.gz").read_bytes()
    except OSError as error:
        raise NsyncError(f"this nsync install lacks its copy of plotly.js ({error}): reinstall nsync") from error


def _charts(figures: dict[str, Figure | None]) -> dict[str, str] | None:
    """The page's two blobs, plotly.js and the figures' JSON, or None when there is nothing to draw."""
    drawn = {name: figure for name, figure in figures.items() if figure is not None}
    if not drawn:
        return None
    data = json.dumps(drawn, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    # no timestamp: the same report, the same page; level 9 would buy ~1 % for 4x the time
    packed = gzip.compress(data, 6, mtime=0)
    return {
        name: base64.b64encode(blob).decode("ascii") for name, blob in (("plotly", plotly_js()), ("figures", packed))
    }


@functools.singledispatch
def render_html(result: Result, options: RenderOptions = RenderOptions()) -> str:
    """The page of ``result``: an analysis's (call sites, timeline, per-step chart; its first ``options.top``
    call sites, 50) or a diff's."""
    raise TypeError(f"not an nsync result: {type(result).__name__}")


@render_html.register
def _ranks_html(result: Ranks, options: RenderOptions = RenderOptions()) -> str:
    refuse(result, "HTML", "its JSON, Markdown or the terminal summary")


@render_html.register
def _measurement_html(result: Measurement, options: RenderOptions = RenderOptions()) -> str:
    refuse(result, "HTML", "its JSON, Markdown or the terminal summary")


@render_html.register
def _analysis_html(result: Analysis, options: RenderOptions = RenderOptions()) -> str:
    report = result
    search = search_folders(report.trace.path, list(options.source_dirs))
    sites = report.callsites[: options.top_or(50)]
    figures = {"timeline": timeline_figure(report.timeline), "steps": steps_figure(report)}
    return (
        environment()
        .get_template("report.html.j2")
        .render(
            report=report,
            sites=sites,
            more_sites=len(report.callsites) - len(sites),
            sources=_excerpts(sites, search),
            title=Path(report.trace.path).name,
            charts=_charts(figures),
            drawn={name for name, figure in figures.items() if figure is not None},
            generated=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            version=installed_version(),
        )
    )


@render_html.register
def _diff_html(report: Diff, options: RenderOptions = RenderOptions()) -> str:
    """Headline deltas, the call-site delta table, and one representative step of each run, one above the
    other on the same time scale."""
    search = [Path(report.candidate.path).resolve().parent, Path(report.baseline.path).resolve().parent, Path.cwd()]
    scale_ms = report.timeline_scale_ms
    figures = {
        f"timeline-{name}": timeline_figure(t, step_only=True, x_max_ms=scale_ms) if t and t.median_step_ns else None
        for t, name in zip(report.timelines, ("baseline", "candidate"))
    }
    return (
        environment()
        .get_template("diff.html.j2")
        .render(
            data=report,
            headline=diff_headline(report),
            charts=_charts(figures),
            drawn={name for name, figure in figures.items() if figure is not None},
            version=installed_version(),
            generated=dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            names=[Path(report.baseline.path).name, Path(report.candidate.path).name],
            sources=[source_line(site.file, site.line or site.baseline_line or 0, search) for site in report.callsites],
        )
    )


def _excerpts(sites: list[CallSite], search: list[Path]) -> list[list[dict[str, Any]] | str]:
    """Each call site's lines of source; a line shown for a site above it is named, not shown again (a
    library's several syncs under one line of the program)."""
    shown: dict[tuple[str, int], int] = {}
    excerpts: list[list[dict[str, Any]] | str] = []
    for rank, site in enumerate(sites, 1):
        first = shown.setdefault((site.file, site.line), rank)
        excerpts.append(f"the line of #{first}" if first != rank else source_context(site.file, site.line, search))
    return excerpts
