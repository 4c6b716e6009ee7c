"""The terminal summary of lined-up ranks: each rank's lateness, and the syncs that make a rank late."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from nsync.render.options import RenderOptions
from nsync.render.terminal.layout import Column, fitted_table
from nsync.render.text import fixed, lined_up, printable_all
from nsync.report import Ranks

RANK_COLUMNS: list[Column] = [
    ("rank", "rank", "right"),
    ("last at\ncollectives", "last", "right"),
    ("late\nms/step", "late", "right"),
    ("step\nms", "step", "right"),
    ("GPU idle\nms/step", "idle", "right"),
    ("steps", "steps", "right"),
    ("collectives", "collectives", "right"),
    ("export", "path", "left"),
]
STRAGGLER_COLUMNS: list[Column] = [
    ("rank", "rank", "right"),
    ("call site", "where", "left"),
    ("delay to all ranks\nms/step", "delay", "right"),
    ("collectives\ndelayed", "count", "right"),
    ("issued at", "issued", "left"),
    ("function", "function", "left"),
]


def ranks_summary(result: Ranks, options: RenderOptions) -> Group:
    report = printable_all(result)
    top, width = options.top_or(10), options.width
    head = Text()
    head.append("nsync ranks ", style="bold")
    head.append(f"{len(report.ranks)} ranks, {lined_up(report)}\n")
    head.append(f"verdict: {report.verdict}\n", style="bold")
    rows = [
        {
            "rank": str(rank.rank),
            "last": str(rank.last_at),
            "late": fixed(rank.lateness_ms_per_step),
            "step": fixed(rank.median_step_ms),
            "idle": fixed(rank.gpu_idle_ms_per_step),
            "steps": str(rank.steps),
            "collectives": str(rank.collectives),
            "path": rank.path,
        }
        for rank in report.ranks
    ]
    parts: list[Text | Table] = [head, fitted_table(RANK_COLUMNS, rows, width)]
    if report.stragglers:
        parts.append(Text("syncs that make a rank late, by the delay they add to every rank's collectives:"))
        sites = [
            {
                "rank": str(site.rank),
                "where": site.where,
                "delay": fixed(site.delay_ms_per_step),
                "count": str(site.collectives_delayed),
                "issued": site.issued_at,
                "function": site.function,
            }
            for site in report.stragglers[:top]
        ]
        parts.append(fitted_table(STRAGGLER_COLUMNS, sites, width))
    return Group(*parts)
