"""Renderers of a diff's report (nsync.report.diff): JSON (``nsync.diff/1``), Markdown and the terminal
summary."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Group
from rich.table import Table
from rich.text import Text

from nsync.render.markdown import cell, code_span
from nsync.render.terminal import ISSUED_AT, Column, fitted_table
from nsync.render.text import fixed, printable_all
from nsync.report.diff import DiffReport, as_diff_report, diff_report_to_dict

if TYPE_CHECKING:
    from nsync.diff import Diff

VERDICT_STYLE = {"regression": "bold red", "improvement": "bold green", "no-change": "bold", "inconclusive": "yellow"}


def render_diff_json(source: DiffReport | Diff) -> str:
    return json.dumps(diff_report_to_dict(as_diff_report(source)), indent=2, allow_nan=False) + "\n"


def headline(report: DiffReport) -> str:
    step = report.step_ms
    text = f"verdict: {report.verdict}"
    if step.baseline is not None:
        text += (
            f"; step {fixed(step.baseline)} → {fixed(step.candidate)} ms "
            f"({fixed(step.delta_pct, 1, sign=True)} %, noise {fixed(step.noise_pct, 1)} %, "
            f"{step.basis} step time under the profiler)"
        )
    unprofiled = step.unprofiled
    if unprofiled is not None:
        noise = unprofiled.noise_pct
        basis = f", noise {fixed(noise, 1)} % in the calibration runs; the verdict's basis" if noise is not None else ""
        text += (
            f"; predicted without the profiler {fixed(unprofiled.baseline)} → "
            f"{fixed(unprofiled.candidate)} ms ({fixed(unprofiled.delta_pct, 1, sign=True)} %, "
            f"{'calibrated' if unprofiled.calibrated else 'uncalibrated'}{basis})"
        )
    if step.verdict_basis != "profiled" and step.profiled_verdict != report.verdict:
        text += f"; under the profiler alone: {step.profiled_verdict}"
    return text


def render_diff_markdown(source: DiffReport | Diff, top: int = 10) -> str:
    report = printable_all(replace(as_diff_report(source), timelines=(None, None)))
    lines = [
        f"### nsync diff: {cell(Path(report.baseline.path).name)} → {cell(Path(report.candidate.path).name)}",
        "",
        f"**{cell(headline(report))}**",
        "",
    ]
    lines += [f"> {cell(reason)}" for reason in report.reasons]
    exposed = report.exposed_idle_ms_per_step
    if exposed.baseline is not None:
        lines += [f"Exposed idle after syncs: {fixed(exposed.baseline)} → {fixed(exposed.candidate)} ms/step", ""]
    sites = [s for s in report.callsites if s.status != "unchanged"][:top]
    if sites:
        lines += [
            "| call site | function | status | baseline ms/step | candidate ms/step | delta |",
            "|---|---|---|---:|---:|---:|",
        ]
        lines += [
            f"| {code_span(s.where)}"
            f"{' (issued at ' + code_span(s.issued_at) + ')' if s.issued_at else ''} | {cell(s.function)} | "
            f"{s.status} | "
            f"{fixed(s.baseline_exposed_idle_ms_per_step)} | {fixed(s.candidate_exposed_idle_ms_per_step)} | "
            f"{fixed(s.delta_ms_per_step, sign=True)} |"
            for s in sites
        ]
    else:
        lines.append("No call site changed beyond the noise.")
    return "\n".join(lines).rstrip() + "\n"


def diff_summary(source: DiffReport | Diff, top: int = 10, width: int = 120) -> Group:
    report = printable_all(replace(as_diff_report(source), timelines=(None, None)))
    parts: list[Text | Table] = [
        Text(f"nsync diff {report.baseline.path} → {report.candidate.path}"),
        Text(headline(report), style=VERDICT_STYLE.get(report.verdict, "")),
    ]
    parts += [Text(f"inconclusive because {reason}", style="yellow") for reason in report.reasons]
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
