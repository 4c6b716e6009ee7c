"""Renderers of a :class:`nsync.diff.Diff`: JSON (``nsync.diff/1``), Markdown and the terminal summary."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from nsync.render.markdown import cell, code_span
from nsync.render.model import ns_to_ms, where
from nsync.render.terminal import fitted_table, fixed

if TYPE_CHECKING:
    from nsync.diff import Diff

VERDICT_STYLE = {"regression": "bold red", "improvement": "bold green", "no-change": "bold", "inconclusive": "yellow"}


def _side(analysis: Any) -> dict[str, Any]:
    return {
        "path": analysis.trace_path,
        "nsys_version": analysis.nsys_version,
        "program": analysis.program,
        "gpus": analysis.gpus,
        "steps": analysis.steps.count,
        "step_source": analysis.steps.source,
    }


def diff_to_dict(result: Diff) -> dict[str, Any]:
    from nsync.diff import SCHEMA

    sites = [
        {
            "file": row["file"],
            "line": None if math.isnan(row["line_c"]) else int(row["line_c"]),
            "baseline_line": None if math.isnan(row["line_b"]) else int(row["line_b"]),
            "function": row["function"],
            "issued_at": row["issued"] or None,
            "status": row["status"],
            "baseline_exposed_idle_ms_per_step": ns_to_ms(row["per_step_ns_b"]),
            "candidate_exposed_idle_ms_per_step": ns_to_ms(row["per_step_ns_c"]),
            "delta_ms_per_step": ns_to_ms(row["delta_ns"]),
        }
        for row in result.callsites.astype({"line_b": float, "line_c": float}).to_dict("records")
    ]
    for site in sites:  # a removed site keeps its baseline line as its line
        site["line"] = site["line"] if site["line"] is not None else site["baseline_line"]
    return {
        "schema": SCHEMA,
        "verdict": result.verdict,
        "reasons": result.reasons,
        "baseline": _side(result.baseline),
        "candidate": _side(result.candidate),
        "step_ms": result.step_ms,
        "gpu_idle_ms_per_step": result.gpu_idle_ms_per_step,
        "exposed_idle_ms_per_step": result.exposed_idle_ms_per_step,
        "callsites": sites,
    }


def render_diff_json(result: Diff) -> str:
    return json.dumps(diff_to_dict(result), indent=2, allow_nan=False) + "\n"


def headline(result: Diff) -> str:
    step = result.step_ms
    text = f"verdict: {result.verdict}"
    if step["baseline"] is not None:
        text += (
            f"; step {fixed(step['baseline'])} → {fixed(step['candidate'])} ms "  # type: ignore[arg-type]
            f"({fixed(step['delta_pct'], 1, sign=True)} %, noise {fixed(step['noise_pct'], 1)} %, "  # type: ignore[arg-type]
            f"{step['basis']} step time under the profiler)"
        )
    if step.get("unprofiled_baseline") is not None:
        noise = step.get("unprofiled_noise_pct")
        basis = (
            f", noise {fixed(noise, 1)} % in the calibration runs; the verdict's basis"  # type: ignore[arg-type]
            if noise is not None
            else ""
        )
        text += (
            f"; predicted without the profiler {fixed(step['unprofiled_baseline'])} → "  # type: ignore[arg-type]
            f"{fixed(step['unprofiled_candidate'])} ms ({fixed(step['unprofiled_delta_pct'], 1, sign=True)} %, "  # type: ignore[arg-type]
            f"{'calibrated' if step['unprofiled_calibrated'] else 'uncalibrated'}{basis})"
        )
    if step["verdict_basis"] != "profiled" and step.get("profiled_verdict") != result.verdict:
        text += f"; under the profiler alone: {step['profiled_verdict']}"
    return text


def render_diff_markdown(result: Diff, top: int = 10) -> str:
    data = diff_to_dict(result)
    lines = [
        f"### nsync diff: {cell(Path(result.baseline.trace_path).name)} → "
        f"{cell(Path(result.candidate.trace_path).name)}",
        "",
        f"**{cell(headline(result))}**",
        "",
    ]
    lines += [f"> {cell(reason)}" for reason in result.reasons]
    exposed = data["exposed_idle_ms_per_step"]
    if exposed["baseline"] is not None:
        lines += [f"Exposed idle after syncs: {fixed(exposed['baseline'])} → {fixed(exposed['candidate'])} ms/step", ""]
    sites = [s for s in data["callsites"] if s["status"] != "unchanged"][:top]
    if sites:
        lines += [
            "| call site | function | status | baseline ms/step | candidate ms/step | delta |",
            "|---|---|---|---:|---:|---:|",
        ]
        lines += [
            f"| {code_span(where(s['file'], s['line']))}"
            f"{' (issued at ' + code_span(s['issued_at']) + ')' if s['issued_at'] else ''} | {cell(s['function'])} | "
            f"{s['status']} | "
            f"{fixed(s['baseline_exposed_idle_ms_per_step'])} | {fixed(s['candidate_exposed_idle_ms_per_step'])} | "
            f"{fixed(s['delta_ms_per_step'], sign=True)} |"
            for s in sites
        ]
    else:
        lines.append("No call site changed beyond the noise.")
    return "\n".join(lines).rstrip() + "\n"


def diff_summary(result: Diff, top: int = 10, width: int = 120) -> Group:
    data = diff_to_dict(result)
    parts: list[Text | Table] = [
        Text(f"nsync diff {result.baseline.trace_path} → {result.candidate.trace_path}"),
        Text(headline(result), style=VERDICT_STYLE.get(result.verdict, "")),
    ]
    parts += [Text(f"inconclusive because {reason}", style="yellow") for reason in result.reasons]
    library = any(site["issued_at"] for site in data["callsites"][:top])
    columns = [
        ("call site", "where", "left"),
        *([("issued at", "issued", "left")] if library else []),
        ("delta\nms/step", "delta", "right"),
        ("status", "status", "left"),
        ("baseline\nms/step", "baseline", "right"),
        ("candidate\nms/step", "candidate", "right"),
        ("function", "function", "left"),
    ]
    rows = [
        {
            "where": where(site["file"], site["line"]),
            "issued": site["issued_at"] or "",
            "function": str(site["function"]),
            "status": site["status"],
            "baseline": fixed(site["baseline_exposed_idle_ms_per_step"]),
            "candidate": fixed(site["candidate_exposed_idle_ms_per_step"]),
            "delta": fixed(site["delta_ms_per_step"], sign=True),
        }
        for site in data["callsites"][:top]
    ]
    table = fitted_table(columns, rows, width)
    if data["callsites"]:
        parts.append(table)
    return Group(*parts)
