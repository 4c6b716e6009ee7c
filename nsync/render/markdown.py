"""A compact Markdown summary to paste into a pull-request comment."""

from __future__ import annotations

import html
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nsync.render.json import analysis_to_dict, fixed
from nsync.render.terminal import ONCE_ROWS, issued_at, where

if TYPE_CHECKING:
    from nsync.analysis import Analysis


def cell(value: object) -> str:
    """Trace text made inert in a table cell: no HTML, no column breaks, no code-span escapes."""
    return html.escape(str(value)).replace("|", "\\|").replace("`", "'").replace("\n", " ")


def code_span(value: object) -> str:
    """A code span: inert already (no HTML inside), but a backtick would end it and a pipe the cell."""
    return "`" + str(value).replace("`", "'").replace("|", "\\|").replace("\n", " ") + "`"


def render_markdown(analysis: Analysis, top: int = 10) -> str:
    data: dict[str, Any] = analysis_to_dict(analysis, top)
    steps, totals = data["steps"], data["totals"]
    lines = [f"### nsync: {cell(Path(analysis.trace_path).name)}", ""]
    if data["verdict"]:
        lines += [f"**{cell(data['verdict']['text'])}**", ""]
    version = data["trace"]["nsys_version"]
    facts = [cell(", ".join(data["trace"]["gpus"]) or "no GPU"), f"nsys {cell(version)}" if version else "nsys ?"]
    if steps["count"]:
        facts.append(f"{steps['count']} steps, median {fixed(steps['median_ms'])} ms")
        per = steps["count"]
        facts.append(
            f"GPU idle {totals['gpu_idle_ms'] / per:.3f} ms/step, "
            f"{totals['exposed_idle_ms'] / per:.3f} ms/step exposed after syncs"
        )
    else:
        facts.append(
            f"GPU idle {fixed(totals['gpu_idle_ms'])} ms, {fixed(totals['exposed_idle_ms'])} ms exposed after syncs"
        )
    lines += [" · ".join(facts), ""]
    if data["callsites"]:
        unit = "/step" if steps["count"] else ""
        library = any(issued_at(site) for site in data["callsites"])
        lines += [
            f"| # | call site |{' issued at |' if library else ''} what-if saving ms/step | syncs/step | "
            f"exposed idle ms{unit} | host wait ms{unit} | fix |",
            f"|---:|---|{'---|' if library else ''}---:|---:|---:|---:|---|",
        ]
        for rank, site in enumerate(data["callsites"], 1):
            exposed = site["exposed_idle_ms_per_step"] if steps["count"] else site["exposed_idle_ms"]
            wait = site["host_wait_ms_per_step"] if steps["count"] else site["host_wait_ms"]
            issued = f" {code_span(issued_at(site)) if issued_at(site) else ''} |" if library else ""
            lines.append(
                f"| {rank} | {code_span(where(site))} |{issued} {fixed(site['predicted_saving_ms_per_step'])} | "
                f"{fixed(site['syncs_per_step'], 2)} | {fixed(exposed)} | {fixed(wait)} | {cell(site['short_hint'])} |"
            )
        more = len(analysis.callsites) - len(data["callsites"])
        if more > 0:
            lines += ["", f"{more} more call sites in the full report."]
    else:
        lines.append("No sync call sites in the analysed window.")
    if len(data["phases"]) > 1:
        lines += ["", "| phase | time ms | GPU idle | syncs | host wait ms |", "|---|---:|---:|---:|---:|"]
        for phase in data["phases"]:
            lines.append(
                f"| {phase['phase']} | {fixed(phase['duration_ms'], 1)} | {fixed(phase['gpu_idle_pct'], 0)} % | "
                f"{phase['sync_count']} | {fixed(phase['host_wait_ms'])} |"
            )
    outside = data["outside_main_loop"][:ONCE_ROWS]
    if outside and steps["count"]:
        library = any(issued_at(site) for site in outside)
        lines += [
            "",
            "Syncs outside the main loop, once each: the host's wait in them is the most they cost.",
            "",
            f"| phase | call site |{' issued at |' if library else ''} syncs | host wait ms |",
            f"|---|---|{'---|' if library else ''}---:|---:|",
        ]
        for site in outside:
            issued = f" {code_span(issued_at(site)) if issued_at(site) else ''} |" if library else ""
            lines.append(
                f"| {site['phase']} | {code_span(where(site))} |{issued} {site['count']} | "
                f"{fixed(site['host_wait_ms'])} |"
            )
    for warning in data["warnings"]:  # a blank line between them: one quote each, not one merged paragraph
        lines += ["", f"> {cell(warning)}"]
    return "\n".join(lines).rstrip() + "\n"
