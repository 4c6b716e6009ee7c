"""The terminal summary of a diff: the verdict with its step times, and the call sites that changed."""

from __future__ import annotations

from dataclasses import replace

from rich.console import Group
from rich.table import Table
from rich.text import Text

from nsync.render.options import RenderOptions
from nsync.render.terminal.layout import ISSUED_AT, Column, fitted_table
from nsync.render.text import diff_headline, fixed, printable_all
from nsync.report import Diff

VERDICT_STYLE = {
    "regression": "bold red",
    "improvement": "bold green",
    "no-change": "bold",
    "unclear": "yellow",
    "inconclusive": "yellow",
}


def diff_summary(source: Diff, options: RenderOptions) -> Group:
    report = printable_all(replace(source, timelines=(None, None)))
    top, width = options.top_or(10), options.width
    parts: list[Text | Table] = [
        Text(f"nsync diff {report.baseline.path} → {report.candidate.path}"),
        Text(diff_headline(report), style=VERDICT_STYLE.get(report.verdict, "")),
    ]
    parts += [Text(f"{report.verdict} because {reason}", style="yellow") for reason in report.reasons]
    columns: list[Column] = [
        ("call site", "where", "left"),
        *([ISSUED_AT] if report.library_frames(top) else []),
        ("delta\nms/step", "delta", "right"),
        ("status", "status", "left"),
        ("baseline\nms/step", "baseline", "right"),
        ("candidate\nms/step", "candidate", "right"),
        ("function", "function", "left"),
    ]
    rows = [
        {
            "where": site.where,
            "issued": site.issued_at or "",
            "function": str(site.function),
            "status": site.status,
            "baseline": fixed(site.baseline_exposed_idle_ms_per_step),
            "candidate": fixed(site.candidate_exposed_idle_ms_per_step),
            "delta": fixed(site.delta_ms_per_step, sign=True),
        }
        for site in report.callsites[:top]
    ]
    if report.callsites:
        parts.append(fitted_table(columns, rows, width))
    return Group(*parts)
