"""A compact Markdown summary of any result, to paste into a pull-request comment."""

from __future__ import annotations

import functools
import html
import re
import textwrap
from dataclasses import replace
from pathlib import Path

from nsync.render.measurement import describe, how_measured, samples_of, verdict_line, version_of
from nsync.render.options import RenderOptions
from nsync.render.text import (
    ONCE_ROWS,
    SETTING,
    diff_headline,
    edits_said,
    fixed,
    likely,
    lined_up,
    printable,
    printable_all,
)
from nsync.report import Analysis, Diff, Measurement, Ranks, Result
from nsync.report.analysis import LIKELY, CallSite
from nsync.words import counted


def cell(value: object) -> str:
    """Trace text made inert in a table cell: no HTML, no column breaks, no code-span escapes."""
    return html.escape(str(value), quote=False).replace("|", "\\|").replace("`", "'").replace("\n", " ")


def code_span(value: object) -> str:
    """A code span: inert already (no HTML inside), but a backtick would end it and a pipe the cell."""
    return "`" + str(value).replace("`", "'").replace("|", "\\|").replace("\n", " ") + "`"


FIXES = 3  # the call sites whose rewrite the Markdown spells out


def prose(text: str) -> str:
    """Advice's words: its `code spans` kept as code spans, the rest inert like a cell."""
    parts = text.split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: no spans at all
        return cell(text)
    return "".join(code_span(part) if k % 2 else cell(part) for k, part in enumerate(parts))


def fenced(code: str, language: str) -> list[str]:
    """A fenced code block that no backtick run inside the code can close."""
    longest = max((len(run) for run in re.findall(r"`+", code)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}{language}", *code.splitlines(), fence]


def _fixes(sites: list[CallSite]) -> list[str]:
    """Each top call site's fix: in words, then the rewrite as a GitHub suggestion (paste it as a review
    comment on the line it names and the PR offers to apply it), then its one-time set-up and caveat."""
    lines: list[str] = []
    for rank, site in enumerate(sites, 1):
        advice = site.advice
        if advice is None or (advice.rewrite is None and not advice.setup):
            continue
        dependency = {"false": ", a false dependency", "true": ", a true dependency"}.get(advice.dependency, "")
        lines += ["", f"#### Fix #{rank}: {code_span(site.where)} ({cell(advice.pattern)}{dependency})", ""]
        lines += [prose(advice.why), ""]
        span = advice.span
        name = code_span(Path(advice.file).name)
        if advice.rewrite == "":
            lines += [f"Delete {span} of {name} (an empty suggestion):", "", *fenced("", "suggestion"), ""]
        elif advice.rewrite is not None:
            lines += [f"{span.capitalize()} of {name} becomes (a suggestion: comment it on that line):", ""]
            lines += [*fenced(advice.rewrite, "suggestion"), ""]
        if advice.setup:
            placed = f"Once, before line {advice.setup_line} of {name}:" if advice.setup_line else (
                f"{SETTING[advice.basis].capitalize()}:"
            )  # fmt: skip
            lines += [placed, "", *fenced(textwrap.dedent(advice.setup), "python"), ""]
        if advice.caveat:
            lines += [f"> {prose(advice.caveat)}"]
    return lines


@functools.singledispatch
def render_markdown(result: Result, options: RenderOptions = RenderOptions()) -> str:
    """``result`` in Markdown (a pull-request comment), its first ``options.top`` call sites (10) listed."""
    raise TypeError(f"not an nsync result: {type(result).__name__}")


@render_markdown.register
def _analysis_markdown(result: Analysis, options: RenderOptions = RenderOptions()) -> str:
    report = printable_all(replace(result, timeline=None, tables=None))  # no control character from the trace
    steps, totals = report.steps, report.totals
    lines = [f"### nsync: {cell(Path(report.trace.path).name)}", ""]
    if report.verdict:
        lines += [f"**{cell(report.verdict.text)}**", ""]
    facts = [cell(", ".join(report.trace.gpus) or "no GPU"), cell(report.trace.made_by)]
    if steps.count:
        each = f" ({steps.each})" if steps.each else ""
        mean = f", mean {fixed(steps.mean_ms)} ms" if steps.mean_apart else ""
        facts.append(f"{counted(steps.count, 'step')}{each}, median {fixed(steps.median_ms)} ms{mean}")
        facts.append(
            f"GPU idle {fixed(report.gpu_idle_ms_per_step)} ms/step, "
            f"{fixed(report.exposed_idle_ms_per_step)} ms/step exposed after syncs"
        )
    else:
        facts.append(f"GPU idle {fixed(totals.gpu_idle_ms)} ms, {fixed(totals.exposed_idle_ms)} ms exposed after syncs")
    lines += [" · ".join(facts), ""]
    sites = report.callsites[: options.top_or(10)]
    lines += _sites_table(report, sites) if sites else ["No sync call sites in the analysed window."]
    if len(report.phases) > 1:
        lines += ["", "| phase | time ms | GPU idle | syncs | host wait ms |", "|---|---:|---:|---:|---:|"]
        for phase in report.phases:
            lines.append(
                f"| {phase.phase} | {fixed(phase.duration_ms, 1)} | {fixed(phase.gpu_idle_pct, 0)} % | "
                f"{phase.sync_count} | {fixed(phase.host_wait_ms)} |"
            )
    lines += _outside_table(report)
    for warning in report.warnings:  # a blank line between them: one quote each, not one merged paragraph
        lines += ["", f"> {cell(warning)}"]
    return "\n".join(lines).rstrip() + "\n"


def _sites_table(report: Analysis, sites: list[CallSite]) -> list[str]:
    """The call sites' table, the top ones' fixes, and the reads to do together."""
    unit = "/step" if report.steps.count else ""
    library = report.library_frames(sites)
    lines = [
        f"| # | call site |{' issued at |' if library else ''} what-if saving ms/step | syncs/step | "
        f"exposed idle ms{unit} | host wait ms{unit} | fix |",
        f"|---:|---|{'---|' if library else ''}---:|---:|---:|---:|---|",
    ]
    for rank, site in enumerate(sites, 1):
        exposed = site.exposed_idle_ms_per_step if report.steps.count else site.exposed_idle_ms
        wait = site.host_wait_ms_per_step if report.steps.count else site.host_wait_ms
        issued = f" {code_span(site.issued_at) if site.issued_at else ''} |" if library else ""
        span = likely(*site.saving_range_ms)
        span = f" ({span})" if span else ""
        if site.loop_saving_ms_per_step is not None:
            loop_span = likely(*site.loop_saving_range_ms)
            span += f"; loop at once {fixed(site.loop_saving_ms_per_step)}" + (f" ({loop_span})" if loop_span else "")
        lines.append(
            f"| {rank} | {code_span(site.where)} |{issued} {fixed(site.predicted_saving_ms_per_step)}{span} | "
            f"{fixed(site.syncs_per_step, 2)} | {fixed(exposed)} | {fixed(wait)} | "
            f"{cell(site.advice.short if site.advice else site.short_hint)} |"
        )
    more = len(report.callsites) - len(sites)
    if more > 0:
        lines += ["", f"{counted(more, 'more call site')} in the full report."]
    verdict = report.verdict
    if verdict is not None and not verdict.worth_fixing and not verdict.measure:
        # a PR comment that says "nothing worth fixing" spells out no fix, alone or together
        return [
            *lines,
            "",
            "No fix is spelled out here: nothing is worth fixing for speed (each is in the HTML report).",
        ]
    lines += _fixes(sites[:FIXES])
    lines += _fixed_together(report)
    for group in report.read_together:
        saving = group.predicted_saving_ms_per_step
        said, code = edits_said(group.edits)
        span = likely(*group.saving_range_ms)
        lines += ["", f"#### Read together: {code_span(group.where)}"
                  + (f", saving {fixed(saving)} ms/step" if saving is not None else "")
                  + (f" ({LIKELY} {span})" if span else ""), ""]  # fmt: skip
        lines += [f"{prose(group.why)}.", "", f"{said.capitalize()}", "", *fenced(code, "python"), ""]
        lines += [f"> {prose(group.caveat)}"]
    return lines


def _fixed_together(report: Analysis) -> list[str]:
    """Each fix that removes the syncs of several call sites: what it is, where, and what it saves."""
    lines = []
    for group in report.fixed_together:
        what = f"one setting, {code_span(group.fix)}," if group.kind == "setting" else f"one statement ({group.fix}):"
        saving = group.predicted_saving_ms_per_step
        span = likely(*group.saving_range_ms)
        figure = (f", saving {fixed(saving)} ms/step" if saving is not None else "") + (
            f" ({LIKELY} {span})" if span else ""
        )
        lines += ["", f"#### Fix together: {what} {', '.join(code_span(where) for where in group.sites)}{figure}"]
    return lines


def _outside_table(report: Analysis) -> list[str]:
    outside = report.outside_main_loop[:ONCE_ROWS]
    if not outside or not report.steps.count:
        return []
    library = report.library_frames(outside)
    lines = [
        "",
        "Syncs outside the main loop, once each: the host's wait in them is the most they cost.",
        "",
        f"| phase | call site |{' issued at |' if library else ''} syncs | host wait ms |",
        f"|---|---|{'---|' if library else ''}---:|---:|",
    ]
    for once in outside:
        issued = f" {code_span(once.issued_at) if once.issued_at else ''} |" if library else ""
        lines.append(f"| {once.phase} | {code_span(once.where)} |{issued} {once.count} | {fixed(once.host_wait_ms)} |")
    return lines


@render_markdown.register
def _diff_markdown(result: Diff, options: RenderOptions = RenderOptions()) -> str:
    report = printable_all(replace(result, timelines=(None, None)))
    top = options.top_or(10)
    lines = [
        f"### nsync diff: {cell(Path(report.baseline.path).name)} → {cell(Path(report.candidate.path).name)}",
        "",
        f"**{cell(diff_headline(report))}**",
        "",
    ]
    lines += [f"> {report.verdict} because {cell(reason)}" for reason in report.reasons]
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


@render_markdown.register
def _ranks_markdown(result: Ranks, options: RenderOptions = RenderOptions()) -> str:
    report = printable_all(result)
    lines = [
        f"### nsync ranks: {len(report.ranks)} ranks",
        "",
        f"**{cell(report.verdict)}**",
        "",
        f"{lined_up(report)}.",
        "",
        "| rank | last at collectives | late ms/step | step ms | GPU idle ms/step | steps | export |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    lines += [
        f"| {r.rank} | {r.last_at} | {fixed(r.lateness_ms_per_step)} | {fixed(r.median_step_ms)} | "
        f"{fixed(r.gpu_idle_ms_per_step)} | {r.steps} | {code_span(Path(r.path).name)} |"
        for r in report.ranks
    ]
    stragglers = report.stragglers[: options.top_or(10)]
    if stragglers:
        lines += ["", "| rank | call site | delay to all ranks ms/step | collectives delayed | issued at |"]
        lines += ["|---:|---|---:|---:|---|"]
        lines += [
            f"| {s.rank} | {code_span(s.where)} | {fixed(s.delay_ms_per_step)} | {s.collectives_delayed} | "
            f"{code_span(s.issued_at) if s.issued_at else ''} |"
            for s in stragglers
        ]
    lines += [f"\n> {cell(warning)}" for warning in report.warnings]
    return "\n".join(lines).rstrip() + "\n"


@render_markdown.register
def _measurement_markdown(result: Measurement, options: RenderOptions = RenderOptions()) -> str:
    """For a PR comment: the verdict, the two commands' steps in a table (commands made inert), how."""
    m = result
    lines = ["### nsync measure", "", cell(printable(verdict_line(m))), ""]
    samples = "blocks" if m.block_steps else "runs"
    lines += [f"| | command | ms per step | {samples} (ms) | spread |", "| --- | --- | ---: | --- | ---: |"]
    for c in (m.baseline, m.candidate):
        which = f" {version_of(c)}" if m.block_steps else ""
        medians, spread = samples_of(c)
        lines.append(
            f"| {c.label} | {code_span(printable(describe(c.command)))}{which} | {fixed(c.median_step_ms)} | "
            f"{fixed(min(medians))}-{fixed(max(medians))} | {fixed(spread, 1)} % |"
        )
    lines += ["", cell(how_measured(m))]
    lines += [f"note: {cell(printable(note))}" for note in m.notes or ()]
    return "\n".join(lines) + "\n"
